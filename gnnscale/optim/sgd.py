"""SGD with optional (Nesterov) momentum."""

from __future__ import annotations

import torch

from gnnscale.optim.base import OptimizerFactory


class SGD(OptimizerFactory):
    """SGD with ``momentum`` (Nesterov's when ``nesterov``)."""

    def __init__(self, lr: float = 0.01, weight_decay: float = 0.0,
                 weight_decay_layers: list[int] | None = None, momentum: float = 0.0,
                 nesterov: bool = False) -> None:
        super().__init__(lr, weight_decay, weight_decay_layers)
        if momentum < 0:
            raise ValueError(f"optim.momentum must be >= 0, got {momentum}")
        if nesterov and momentum == 0:
            raise ValueError("optim.nesterov=true needs optim.momentum > 0")
        self.momentum, self.nesterov = momentum, nesterov

    def build(self, groups: list[dict]) -> torch.optim.Optimizer:
        """``torch.optim.SGD`` over ``groups`` with ``momentum`` and ``nesterov``."""
        return torch.optim.SGD(groups, lr=self.lr, momentum=self.momentum,
                               nesterov=self.nesterov)
