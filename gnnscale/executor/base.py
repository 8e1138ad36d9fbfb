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
    @abstractmethod
    def module(self) -> torch.nn.Module:
        """The bare model (unwrapped), for evaluation and checkpoints."""

    @property
    @abstractmethod
    def optimizer(self) -> torch.optim.Optimizer:
        """The optimizer, for checkpoints."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release threads and buffers."""
