"""AdamW (Loshchilov & Hutter): weight decay applied to the weights, apart from the gradient."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnscale.optim.adam import Adam, AdamConfig
from gnnscale.registry import register


@register("optim", "adamw")
@dataclass
class AdamWConfig(AdamConfig):
    """``optim=adamw``'s options."""

    _target_: str = "gnnscale.optim.adamw.AdamW"
    weight_decay: float = 0.01


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter)."""

    def build(self, groups: list[dict]) -> torch.optim.Optimizer:
        """``torch.optim.AdamW`` over ``groups`` (decay applied to the weights)."""
        return torch.optim.AdamW(groups, lr=self.lr, betas=self.betas)
