"""Optimizer factory base: a config option builds a factory; strategies call it on the model.

Strategies never pick an optimizer: they call ``ctx.optim(model)``, so every strategy trains
with the same optimizer and settings (``optim=adam optim.lr=0.01``). ``weight_decay_layers``
decays only the parameters of the listed conv layers (Kipf & Welling decay the first layer
only: ``optim.weight_decay_layers=[0]``); None decays every parameter. Only the convs' own
parameters: a residual stack's norms, FFN linears and input/output projections are not decayed
by a layer list (None decays them too).

Parameters with sparse gradients (``nn.Embedding(sparse=True)``: a typed model's embedding
tables of featureless node types) go to ``torch.optim.SparseAdam`` (the configured ``lr``,
and the betas of ``optim=adam``/``adamw``), which updates only the rows a step's gradient holds;
the configured optimizer takes the rest, and a :class:`JointOptimizer` steps both and saves
them as one state dict. SparseAdam has no weight decay: the embedding rows are not decayed.
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
        """A new optimizer over ``model``'s parameters (or a parameter iterable); a model with
        sparse embedding tables gets a :class:`JointOptimizer`."""
        sparse = sparse_parameters(model) if isinstance(model, nn.Module) else []
        if not sparse:
            return self.build(self.param_groups(model))
        skip = {id(p) for p in sparse}
        groups = [{**g, "params": [p for p in g["params"] if id(p) not in skip]}
                  for g in self.param_groups(model)]
        dense = self.build([g for g in groups if g["params"]])
        betas = getattr(self, "betas", (0.9, 0.999))
        return JointOptimizer(dense, torch.optim.SparseAdam(sparse, lr=self.lr, betas=betas))

    @abstractmethod
    def build(self, groups: list[dict]) -> torch.optim.Optimizer:
        """The optimizer over ``groups`` (each with its own ``weight_decay``)."""


def sparse_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The weights of ``model``'s embedding tables that produce sparse gradients."""
    return [m.weight for m in model.modules() if isinstance(m, nn.Embedding) and m.sparse]


class JointOptimizer:
    """Two optimizers stepped as one: the configured one over the dense parameters and one for
    the sparse parameters. Its state dict is the one an optimizer over all the parameters would
    have (parameter ids numbered on across the two), so checkpoints read it like any other."""

    def __init__(self, dense: torch.optim.Optimizer, sparse: torch.optim.Optimizer) -> None:
        self.parts = (dense, sparse)

    @property
    def param_groups(self) -> list[dict]:
        """Both optimizers' parameter groups, the dense one's first."""
        return [g for o in self.parts for g in o.param_groups]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's gradient."""
        for o in self.parts:
            o.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        """One step of each optimizer."""
        for o in self.parts:
            o.step()

    def state_dict(self) -> dict:
        """``{"state", "param_groups"}`` of both, parameter ids numbered on."""
        state: dict = {}
        groups: list[dict] = []
        base = 0
        for o in self.parts:
            sd = o.state_dict()
            state.update({int(k) + base: v for k, v in sd["state"].items()})
            groups += [{**g, "params": [int(i) + base for i in g["params"]]}
                       for g in sd["param_groups"]]
            base += sum(len(g["params"]) for g in sd["param_groups"])
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Split a :meth:`state_dict` back into the two optimizers."""
        groups, base, first = state_dict["param_groups"], 0, 0
        for o in self.parts:
            mine = groups[first:first + len(o.param_groups)]
            first += len(o.param_groups)
            count = sum(len(g["params"]) for g in mine)
            o.load_state_dict({
                "state": {int(k) - base: v for k, v in state_dict["state"].items()
                          if base <= int(k) < base + count},
                "param_groups": [{**g, "params": [int(i) - base for i in g["params"]]}
                                 for g in mine]})
            base += count
