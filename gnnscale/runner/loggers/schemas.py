"""Typed schemas of the ``logger`` options (torch-free: the launcher composes and checks a
config with these alone; each ``_target_`` names the implementation rank 0 builds)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gnnscale.registry import register

MODES = ("offline", "online", "disabled")


@register("logger", "none")
@dataclass
class NoLoggerConfig:
    """``logger=none``'s options."""

    _target_: str = "gnnscale.runner.loggers.none.NoLogger"


@register("logger", "wandb")
@dataclass
class WandbConfig:
    """``logger=wandb``'s options."""

    _target_: str = "gnnscale.runner.loggers.wandb.WandbLogger"
    project: str = "gnnscale"
    entity: str | None = None
    mode: str = "offline"
    name: str | None = None
    tags: list[str] = field(default_factory=list)
