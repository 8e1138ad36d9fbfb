"""Typed schemas of the ``optim`` options (torch-free: the launcher composes and checks a
config with these alone; each ``_target_`` names the implementation a rank builds)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gnnscale.registry import register


@dataclass
class OptimConfig:
    """Fields every optimizer option shares."""

    _target_: str = ""
    lr: float = 0.003
    weight_decay: float = 0.0
    weight_decay_layers: Any = None  # list of conv layer indices, or None = every parameter


@register("optim", "adam")
@dataclass
class AdamConfig(OptimConfig):
    """``optim=adam``'s options."""

    _target_: str = "gnnscale.optim.adam.Adam"
    beta1: float = 0.9
    beta2: float = 0.999


@register("optim", "adamw")
@dataclass
class AdamWConfig(AdamConfig):
    """``optim=adamw``'s options."""

    _target_: str = "gnnscale.optim.adamw.AdamW"
    weight_decay: float = 0.01


@register("optim", "sgd")
@dataclass
class SGDConfig(OptimConfig):
    """``optim=sgd``'s options."""

    _target_: str = "gnnscale.optim.sgd.SGD"
    lr: float = 0.01
    momentum: float = 0.0
    nesterov: bool = False
