"""``logger=none``: no external tracker (console, metrics.jsonl and results.json remain)."""

from __future__ import annotations

from dataclasses import dataclass

from gnnscale.registry import register
from gnnscale.runner.loggers.base import Logger


@register("logger", "none")
@dataclass
class NoLoggerConfig:
    _target_: str = "gnnscale.runner.loggers.none.NoLogger"


class NoLogger(Logger):
    def start(self, config: dict, run_dir: str) -> None:
        pass

    def log_epoch(self, epoch: int, metrics: dict) -> None:
        pass

    def finish(self, summary: dict) -> None:
        pass
