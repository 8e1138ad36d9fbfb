"""``logger=none``: no external tracker (console, metrics.jsonl and results.json remain)."""

from __future__ import annotations

from dataclasses import dataclass

from gnnscale.registry import register
from gnnscale.runner.loggers.base import Logger


@register("logger", "none")
@dataclass
class NoLoggerConfig:
    """``logger=none``'s options."""

    _target_: str = "gnnscale.runner.loggers.none.NoLogger"


class NoLogger(Logger):
    """Records nothing."""

    def start(self, config: dict, run_dir: str) -> None:
        """Nothing to open."""
        pass

    def log_epoch(self, epoch: int, metrics: dict) -> None:
        """Nothing to record."""
        pass

    def finish(self, summary: dict) -> None:
        """Nothing to close."""
        pass
