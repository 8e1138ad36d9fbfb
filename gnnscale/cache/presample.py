"""``cache=presample``: PreSC#K (GNNLab): hotness = mean visit count over K pre-sampled epochs.

The K epochs run the configured sampler over the configured training set in batches of the
training batch size, on the pre-sampling seed stream (never the draws of the training epochs).
Vertices with equal counts are ordered by out-degree (a fraction below one visit, so counts
always dominate); with few epochs this decides the many never-visited vertices.
"""

from __future__ import annotations

import torch

from gnnscale.cache.base import PRESAMPLE, CachePolicy, training_set, visit_counts
from gnnscale.cache.schemas import PresampleCacheConfig


class PresamplePolicy(CachePolicy):
    """Pre-samples ``epochs`` (K) epochs and ranks vertices by how often they were inputs."""

    name = "presample"

    def __init__(self, epochs: int = 1, **budget) -> None:
        super().__init__(**budget)
        PresampleCacheConfig(epochs=epochs).check()
        self.epochs = epochs

    def hotness(self, graph, *, train_idx=None, sampler=None, batch_size: int = 1024,
                seed: int = 0, world_size: int = 1, **kwargs) -> torch.Tensor:
        """:meth:`rank` of the :meth:`counts` of the K pre-sampled epochs."""
        counts = self.counts(graph, train_idx=train_idx, sampler=sampler,
                             batch_size=batch_size, seed=seed, world_size=world_size)
        return self.rank(graph, counts)

    def counts(self, graph, *, train_idx=None, sampler=None, batch_size: int = 1024,
               seed: int = 0, world_size: int = 1, shard: tuple[int, int] = (0, 1)
               ) -> torch.Tensor:
        """The pre-sampling: visit counts over the K epochs of ``world_size`` ranks'
        micro-batches; ``shard = (i, n)`` draws every n-th micro-batch only (n workers split
        the K epochs and sum their counts: ``strategy=factored``'s samplers do)."""
        if sampler is None:
            raise ValueError("cache=presample needs the configured sampler to pre-sample epochs")
        idx = training_set(graph, train_idx, self.name)
        return visit_counts(graph, train_idx=idx, sampler=sampler, batch_size=batch_size,
                            seed=seed, epochs=range(self.epochs), stream=PRESAMPLE,
                            world_size=world_size, shard=shard)

    def rank(self, graph, counts: torch.Tensor) -> torch.Tensor:
        """Hotness from summed visit counts: mean visits per epoch, ties by out-degree."""
        if counts.shape != (graph.num_nodes,):
            raise ValueError(f"presample counts must have one entry per vertex "
                             f"({graph.num_nodes}), got shape {tuple(counts.shape)}")
        deg = graph.out_degree().to(torch.float64)
        tie = deg / (float(deg.max()) + 1.0) if deg.numel() else deg
        return (counts.to(torch.float64) + tie) / self.epochs
