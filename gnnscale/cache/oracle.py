"""``cache=oracle``: the vertices most visited by the measured epochs (for evaluation only).

The true visit counts come either from ``visits`` (a ``[N]`` count tensor recorded during the
run, e.g. ``FeatureStore(record_visits=True).visits`` summed over ranks, or counts of the exact
batches a benchmark replays) or, when none is given, from re-running the sampler over training
epochs ``first_epoch .. first_epoch + epochs - 1`` of the run's schedule on the training stream
(:mod:`gnnscale.sampling.schedule`, every rank's micro-batches): exactly the run's draws.
"""

from __future__ import annotations

from typing import Any

import torch

from gnnscale.cache.base import TRAIN, CachePolicy, replayed, visit_counts
from gnnscale.cache.schemas import OracleCacheConfig
from gnnscale.data.graph import GraphStore
from gnnscale.sampling.base import Sampler
from gnnscale.sampling.schedule import Schedule


class OraclePolicy(CachePolicy):
    """Ranks vertices by their true visit counts over the evaluated epochs."""

    name = "oracle"

    def __init__(self, epochs: int = 1, first_epoch: int = 0,
                 visits: torch.Tensor | None = None, **budget: Any) -> None:
        super().__init__(**budget)
        OracleCacheConfig(epochs=epochs, first_epoch=first_epoch).check()
        self.epochs = epochs
        self.first_epoch = first_epoch
        self.visits = visits

    def hotness(self, graph: GraphStore, *, schedule: Schedule | None = None,
                sampler: Sampler | None = None,
                visits: torch.Tensor | None = None, world_size: int = 1,
                **kwargs: Any) -> torch.Tensor:
        """The true visit counts: ``visits`` (else the policy's own), or a replay of the measured
        epochs on stream ``TRAIN``."""
        counts = visits if visits is not None else self.visits
        if counts is not None:
            counts = torch.as_tensor(counts).cpu().to(torch.float64)
            if counts.shape != (graph.num_nodes,):
                raise ValueError(f"oracle visits must have shape ({graph.num_nodes},), got "
                                 f"{tuple(counts.shape)}")
            return counts
        schedule = replayed(schedule, sampler, self.name, stream=TRAIN, world_size=world_size)
        assert sampler is not None  # replayed refused None with its one line
        epochs = range(self.first_epoch, self.first_epoch + self.epochs)
        return visit_counts(graph, schedule=schedule, sampler=sampler, epochs=epochs)
