"""Adam (Kingma & Ba), weight decay added to the gradient (L2, as PyG's examples use it)."""

from __future__ import annotations

import torch

from gnnscale.optim.base import OptimizerFactory
from gnnscale.optim.schemas import AdamConfig


class Adam(OptimizerFactory):
    """Adam with betas ``(beta1, beta2)``; weight decay added to the gradient (L2)."""

    def __init__(self, lr: float = 0.003, weight_decay: float = 0.0,
                 weight_decay_layers: list[int] | None = None, beta1: float = 0.9,
                 beta2: float = 0.999) -> None:
        super().__init__(lr, weight_decay, weight_decay_layers)
        AdamConfig(beta1=beta1, beta2=beta2).check()
        self.betas = (beta1, beta2)

    def build(self, groups: list[dict]) -> torch.optim.Optimizer:
        """``torch.optim.Adam`` over ``groups``."""
        return torch.optim.Adam(groups, lr=self.lr, betas=self.betas)
