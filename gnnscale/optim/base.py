"""Optimizer factory base: a config option builds a factory; strategies call it on the model.

Strategies never pick an optimizer: they call ``ctx.optim(model)``, so every strategy trains
with the same optimizer and settings (``optim=adam optim.lr=0.01``). ``weight_decay_layers``
decays only the parameters of the listed conv layers (Kipf & Welling decay the first layer
only: ``optim.weight_decay_layers=[0]``); None decays every parameter. Only the convs' own
parameters: a residual stack's norms, FFN linears and input/output projections are not decayed
by a layer list (None decays them too).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable

import torch
from torch import nn

from gnnscale.optim.schemas import OptimConfig


class OptimizerFactory(ABC):
    """``factory(model) -> torch.optim.Optimizer`` with the configured settings."""

    def __init__(self, lr: float = 0.003, weight_decay: float = 0.0,
                 weight_decay_layers: list[int] | None = None) -> None:
        OptimConfig(lr=lr, weight_decay=weight_decay,
                    weight_decay_layers=weight_decay_layers).check()
        self.lr, self.weight_decay = lr, weight_decay
        self.layers = None if weight_decay_layers is None else sorted(set(weight_decay_layers))

    def param_groups(self, model: nn.Module | Iterable[nn.Parameter]) -> list[dict]:
        """One group of every parameter, or the decayed layers' apart from the rest."""
        if self.layers is None:
            params = model.parameters() if isinstance(model, nn.Module) else model
            return [{"params": list(params), "weight_decay": self.weight_decay}]
        convs = getattr(model, "convs", None)
        if convs is None:
            raise ValueError("optim.weight_decay_layers needs the model (with its convs), not "
                             "a bare parameter list")
        if max(self.layers) >= len(convs):
            raise ValueError(f"optim.weight_decay_layers={self.layers} names a layer the "
                             f"{len(convs)}-layer model does not have")
        decayed = {id(p) for i in self.layers for p in convs[i].parameters()}
        params = list(model.parameters())
        return [{"params": [p for p in params if id(p) in decayed],
                 "weight_decay": self.weight_decay},
                {"params": [p for p in params if id(p) not in decayed], "weight_decay": 0.0}]

    def __call__(self, model: nn.Module | Iterable[nn.Parameter]) -> torch.optim.Optimizer:
        """A new optimizer over ``model``'s parameters (or a parameter iterable)."""
        return self.build(self.param_groups(model))

    @abstractmethod
    def build(self, groups: list[dict]) -> torch.optim.Optimizer:
        """The optimizer over ``groups`` (each with its own ``weight_decay``)."""
