"""AdamW (Loshchilov & Hutter): weight decay applied to the weights, apart from the gradient."""

from __future__ import annotations

import torch

from gnnscale.optim.adam import Adam


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter)."""

    def build(self, groups: list[dict]) -> torch.optim.Optimizer:
        """``torch.optim.AdamW`` over ``groups`` (decay applied to the weights)."""
        return torch.optim.AdamW(groups, lr=self.lr, betas=self.betas)
