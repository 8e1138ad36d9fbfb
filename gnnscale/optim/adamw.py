"""AdamW (Loshchilov & Hutter): weight decay applied to the weights, apart from the gradient."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnscale.optim.adam import Adam, AdamConfig
from gnnscale.registry import register


@register("optim", "adamw")
@dataclass
class AdamWConfig(AdamConfig):
    _target_: str = "gnnscale.optim.adamw.AdamW"
    weight_decay: float = 0.01


class AdamW(Adam):
    def build(self, groups: list[dict]) -> torch.optim.Optimizer:
        return torch.optim.AdamW(groups, lr=self.lr, betas=self.betas)
