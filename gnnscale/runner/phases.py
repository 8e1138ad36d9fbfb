"""Where a run's time goes before, between and after its epochs: seconds per phase, in
``results.json`` (``startup``) and in the run's log."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: Set by train.py to the wall-clock time its process started importing (seconds since the
#: epoch), so the launcher can report the import phase.
START_ENV = "GNNSCALE_T0"
#: Set by the launcher to the wall-clock time it starts the ranks (they report the gap).
LAUNCH_ENV = "GNNSCALE_LAUNCH_T"


class Phases:
    """Seconds per named phase, in the order first seen; a phase run twice adds up."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def add(self, name: str, seconds: float) -> None:
        """Add ``seconds`` to phase ``name``."""
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    @contextmanager
    def time(self, name: str) -> Iterator[None]:
        """Time the ``with`` body as phase ``name``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0)

    def since_start(self, name: str) -> None:
        """Phase ``name`` = from the process start recorded by train.py until now (imports and
        composition); nothing when train.py did not record it."""
        t0 = os.environ.pop(START_ENV, None)
        if t0 is not None:
            self.add(name, max(0.0, time.time() - float(t0)))

    @staticmethod
    def format(seconds: dict[str, float]) -> str:
        """``phase 1.23s, ...`` for the log."""
        return ", ".join(f"{k} {v:.2f}s" for k, v in seconds.items())
