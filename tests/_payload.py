"""A pickle payload that would run a shell command when unpickled (a planted file's attack)."""

from __future__ import annotations

import os
from pathlib import Path


class RunsShell:
    """Unpickling this touches ``marker``: the tests check that it never happens."""

    def __init__(self, marker: Path | str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))
