"""``logger=none``: no external tracker (console, metrics.jsonl and results.json remain)."""

from __future__ import annotations

from gnnscale.runner.loggers.base import Logger


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
