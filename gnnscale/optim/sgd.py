"""SGD with optional (Nesterov) momentum."""

from __future__ import annotations

import torch

from gnnscale.optim.base import OptimizerFactory
from gnnscale.optim.schemas import SGDConfig


class SGD(OptimizerFactory):
    """SGD with ``momentum`` (Nesterov's when ``nesterov``)."""

    def __init__(self, lr: float = 0.01, weight_decay: float = 0.0,
                 weight_decay_layers: list[int] | None = None, momentum: float = 0.0,
                 nesterov: bool = False) -> None:
        super().__init__(lr, weight_decay, weight_decay_layers)
        SGDConfig(momentum=momentum, nesterov=nesterov).check()
        self.momentum, self.nesterov = momentum, nesterov

    def build(self, groups: list[dict]) -> torch.optim.Optimizer:
        """``torch.optim.SGD`` over ``groups`` with ``momentum`` and ``nesterov``."""
        return torch.optim.SGD(groups, lr=self.lr, momentum=self.momentum,
                               nesterov=self.nesterov)
