"""Typed schemas of the ``logger`` options (torch-free: the launcher composes and checks a
config with these alone; each ``_target_`` names the implementation rank 0 builds, whose
constructor runs the same :meth:`check`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gnnscale.registry import register
from gnnscale.schema import Options, require_one_of

MODES = ("offline", "online", "disabled")


@register("logger", "none")
@dataclass
class NoLoggerConfig(Options):
    """``logger=none``'s options."""

    _target_: str = "gnnscale.runner.loggers.none.NoLogger"


@register("logger", "wandb")
@dataclass
class WandbConfig(Options):
    """``logger=wandb``'s options."""

    _target_: str = "gnnscale.runner.loggers.wandb.WandbLogger"
    project: str = "gnnscale"
    entity: str | None = None
    mode: str = "offline"
    name: str | None = None
    tags: list[str] = field(default_factory=list)

    def check(self) -> None:
        """A known mode."""
        require_one_of("logger.mode", self.mode, MODES)
