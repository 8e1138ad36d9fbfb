"""``cache=presample``: PreSC#K (GNNLab): hotness = mean visit count over K pre-sampled epochs.

The K epochs run the configured sampler over the run's schedule (the task's training items
and their seeds, in batches of the training batch size, one micro-batch per rank) on the
pre-sampling seed stream (never the draws of the training epochs).
Vertices with equal counts are ordered by out-degree (a fraction below one visit, so counts
always dominate); with few epochs this decides the many never-visited vertices.
"""

from __future__ import annotations

from typing import Any

import torch

from gnnscale.cache.base import PRESAMPLE, CachePolicy, replayed, visit_counts
from gnnscale.cache.schemas import PresampleCacheConfig
from gnnscale.data.graph import GraphStore
from gnnscale.sampling.base import Sampler
from gnnscale.sampling.schedule import Schedule


class PresamplePolicy(CachePolicy):
    """Pre-samples ``epochs`` (K) epochs and ranks vertices by how often they were inputs."""

    name = "presample"

    def __init__(self, epochs: int = 1, **budget: Any) -> None:
        super().__init__(**budget)
        PresampleCacheConfig(epochs=epochs).check()
        self.epochs = epochs

    def hotness(self, graph: GraphStore, *, schedule: Schedule | None = None,
                sampler: Sampler | None = None, world_size: int = 1,
                **kwargs: Any) -> torch.Tensor:
        """:meth:`rank` of the :meth:`counts` of the K pre-sampled epochs."""
        counts = self.counts(graph, schedule=schedule, sampler=sampler, world_size=world_size)
        return self.rank(graph, counts)

    def counts(self, graph: GraphStore, *, schedule: Schedule | None = None,
               sampler: Sampler | None = None, world_size: int = 1,
               shard: tuple[int, int] = (0, 1)) -> torch.Tensor:
        """The pre-sampling: visit counts over the K epochs of ``schedule`` on stream
        ``PRESAMPLE``, one micro-batch per rank of ``world_size``; ``shard = (i, n)`` draws
        every n-th micro-batch only (n workers split the K epochs and sum their counts:
        ``strategy=factored``'s samplers do)."""
        schedule = replayed(schedule, sampler, self.name, stream=PRESAMPLE,
                            world_size=world_size)
        assert sampler is not None  # replayed refused None with its one line
        return visit_counts(graph, schedule=schedule, sampler=sampler,
                            epochs=range(self.epochs), shard=shard)

    def rank(self, graph: GraphStore, counts: torch.Tensor) -> torch.Tensor:
        """Hotness from summed visit counts: mean visits per epoch, ties by out-degree."""
        if counts.shape != (graph.num_nodes,):
            raise ValueError(f"presample counts must have one entry per vertex "
                             f"({graph.num_nodes}), got shape {tuple(counts.shape)}")
        deg = graph.out_degree().to(torch.float64)
        tie = deg / (float(deg.max()) + 1.0) if deg.numel() else deg
        return (counts.to(torch.float64) + tie) / self.epochs
