"""Experiment loggers (rank 0 only). Console and JSON lines are always written by the runner."""

from __future__ import annotations

from abc import ABC, abstractmethod


class Logger(ABC):
    """An experiment tracker the runner calls on rank 0: start, once per epoch, finish."""

    @abstractmethod
    def start(self, config: dict, run_dir: str) -> None:
        """Open the run, recording its config."""

    @abstractmethod
    def log_epoch(self, epoch: int, metrics: dict) -> None:
        """Record one epoch's metrics."""

    @abstractmethod
    def finish(self, summary: dict) -> None:
        """Record the final summary and close."""
