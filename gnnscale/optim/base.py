"""Optimizer factory base: a config option builds a factory; strategies call it on parameters.

Strategies never pick an optimizer: they call ``ctx.optim(model.parameters())``, so every
strategy trains with the same optimizer and settings (``optim=adam optim.lr=0.01``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass

import torch


@dataclass
class OptimConfig:
    """Fields every optimizer option shares."""

    _target_: str = ""
    lr: float = 0.003
    weight_decay: float = 0.0


class OptimizerFactory(ABC):
    """``factory(params) -> torch.optim.Optimizer`` with the configured settings."""

    def __init__(self, lr: float = 0.003, weight_decay: float = 0.0) -> None:
        if lr <= 0:
            raise ValueError(f"optim.lr must be > 0, got {lr}")
        if weight_decay < 0:
            raise ValueError(f"optim.weight_decay must be >= 0, got {weight_decay}")
        self.lr, self.weight_decay = lr, weight_decay

    @abstractmethod
    def __call__(self, params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
        """A new optimizer over ``params``."""
