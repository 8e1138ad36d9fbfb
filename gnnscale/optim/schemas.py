"""Typed schemas of the ``optim`` options (torch-free: the launcher composes and checks a
config with these alone; each ``_target_`` names the implementation a rank builds, whose
constructor runs the same :meth:`check`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.schema import Options, require_at_least, require_range


@dataclass
class OptimConfig(Options):
    """Fields every optimizer option shares."""

    _target_: str = ""
    lr: float = 0.003
    weight_decay: float = 0.0
    weight_decay_layers: Any = None  # list of conv layer indices, or None = every parameter

    def check(self) -> None:
        """A learning rate > 0, a decay >= 0, decayed layers as conv indices or null."""
        if self.lr <= 0:
            raise ConfigError(f"optim.lr must be > 0, got {self.lr}")
        require_at_least("optim.weight_decay", self.weight_decay, 0)
        layers = self.weight_decay_layers
        if layers is not None and (not isinstance(layers, (list, tuple)) or not all(
                isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in layers)):
            raise ConfigError("optim.weight_decay_layers must be a list of conv layer indices "
                              f"(e.g. [0]) or null, got {layers!r}")

    def check_layers(self, num_layers: int) -> None:
        """Every decayed layer is a conv of a ``num_layers``-layer model."""
        layers = self.weight_decay_layers
        if layers and max(layers) >= num_layers:
            raise ConfigError(f"optim.weight_decay_layers={sorted(set(layers))} names a layer "
                              f"the {num_layers}-layer model does not have "
                              f"(model.num_layers={num_layers})")


@register("optim", "adam")
@dataclass
class AdamConfig(OptimConfig):
    """``optim=adam``'s options."""

    _target_: str = "gnnscale.optim.adam.Adam"
    beta1: float = 0.9
    beta2: float = 0.999

    def check(self) -> None:
        """The shared checks, and betas in [0, 1)."""
        super().check()
        for key in ("beta1", "beta2"):
            require_range(f"optim.{key}", getattr(self, key), 0, 1)


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

    def check(self) -> None:
        """The shared checks, momentum >= 0, and Nesterov only with momentum."""
        super().check()
        require_at_least("optim.momentum", self.momentum, 0)
        if self.nesterov and self.momentum == 0:
            raise ConfigError("optim.nesterov=true needs optim.momentum > 0")
