"""Strategy base: who computes what, in which order. One class per strategy, same few methods."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.distributed.launch import Topology
from gnnscale.sampling.base import Sampler


@dataclass
class RunContext:
    """Runtime objects a strategy works with (each built from its own sub-config)."""

    topo: Topology
    graph: GraphStore
    model: torch.nn.Module
    sampler: Sampler
    cache_policy: Any
    deps: Any
    # callable(num_parts) -> PartitionBook, built lazily: not every strategy needs one
    partition: Any
    seed: int
    batch_size: int
    lr: float
    weight_decay: float = 0.0
    extra: dict = field(default_factory=dict)


class Strategy(ABC):
    """Trains one epoch at a time; metrics come back as a dict of per-rank figures."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    @abstractmethod
    def setup(self) -> None:
        """Build what the epochs need (wrapped model, optimizer, feature store, ...)."""

    @abstractmethod
    def train_epoch(self, epoch: int, progress: Any = None) -> dict[str, float]:
        """One pass over the training set; returns this rank's metrics (see runner.metrics)."""

    @property
    def module(self) -> torch.nn.Module:
        """The bare model (unwrapped), for evaluation and checkpoints (set by ``setup``)."""
        return self._module

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The optimizer, for checkpoints (set by ``setup``)."""
        return self._optimizer

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release threads and buffers."""


class SamplingStrategy(Strategy):
    """A strategy whose samples come ahead of training: a prefetch thread, or worker processes.

    ``prefetch`` is how many mini-batches are sampled ahead (0: inline); ``sample_workers`` > 0
    samples in that many processes (:class:`~gnnscale.sampling.workers.SamplerPool`).
    """

    def __init__(self, ctx: RunContext, prefetch: int = 2, sample_workers: int = 0) -> None:
        super().__init__(ctx)
        if prefetch < 0:
            raise ValueError(f"strategy.prefetch must be >= 0, got {prefetch}")
        if sample_workers < 0:
            raise ValueError(f"strategy.sample_workers must be >= 0, got {sample_workers}")
        self.prefetch, self.sample_workers = prefetch, sample_workers
        self.pool = None

    def start_sampler_pool(self) -> None:
        """Start the worker processes (when ``sample_workers`` > 0)."""
        if self.sample_workers > 0:
            from gnnscale.sampling.workers import SamplerPool

            self.pool = SamplerPool(self.ctx.sampler, self.ctx.graph, self.sample_workers,
                                    depth=self.prefetch + self.sample_workers)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None
