"""SGD with optional (Nesterov) momentum."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from gnnscale.optim.base import OptimConfig, OptimizerFactory
from gnnscale.registry import register


@register("optim", "sgd")
@dataclass
class SGDConfig(OptimConfig):
    _target_: str = "gnnscale.optim.sgd.SGD"
    lr: float = 0.01
    momentum: float = 0.0
    nesterov: bool = False


class SGD(OptimizerFactory):
    def __init__(self, lr: float = 0.01, weight_decay: float = 0.0, momentum: float = 0.0,
                 nesterov: bool = False) -> None:
        super().__init__(lr, weight_decay)
        if momentum < 0:
            raise ValueError(f"optim.momentum must be >= 0, got {momentum}")
        if nesterov and momentum == 0:
            raise ValueError("optim.nesterov=true needs optim.momentum > 0")
        self.momentum, self.nesterov = momentum, nesterov

    def __call__(self, params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
        return torch.optim.SGD(params, lr=self.lr, weight_decay=self.weight_decay,
                               momentum=self.momentum, nesterov=self.nesterov)
