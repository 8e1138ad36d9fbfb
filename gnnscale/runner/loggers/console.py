"""The run's console: ``train.log`` in the run folder holds every line the run prints (the
launcher's and rank 0's), and the terminal gets the routine ones only when the run is verbose.

A run prints two kinds of lines. *Routine* lines (the graph's summary, one line per epoch, the
summary table, the start-up phases, where the results are) go through :meth:`RunLog.detail`:
always into ``train.log``, onto standard output only when :func:`is_verbose`. Everything else a
run prints (a note, a refusal of ``strategy=auto``'s, a resume) goes to standard output as
before and into ``train.log`` too: while a run holds its :func:`run_log`, ``sys.stdout`` is a
:class:`Tee` of both. Hydra's own logging writes to the same file (``hydra.job.name`` is
``train`` for ``train.py``), but gnnscale prints rather than logs, which is why that file was
empty before the tee.

``verbose`` (a root key) decides: ``true`` or ``false`` as given, else (``null``) the value of
``progress``: ``train.py`` is verbose, ``train.py progress=false`` is quiet, and
``gnnscale.train`` is quiet unless given ``verbose=True`` (it sets the key).
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

#: The file in the run folder that holds what the run printed.
FILENAME = "train.log"


def is_verbose(cfg: Any) -> bool:
    """Whether ``cfg``'s run prints its routine lines: ``verbose`` when set, else ``progress``."""
    verbose = cfg.get("verbose") if hasattr(cfg, "get") else None
    if verbose is None:
        return bool(cfg.get("progress", True)) if hasattr(cfg, "get") else True
    return bool(verbose)


def on_a_terminal(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (default: standard error, where progress bars go) is a terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class Tee(io.TextIOBase):
    """A text stream writing to ``stream`` and appending to the file ``path`` (line-buffered:
    the launcher and rank 0 append to one file, line by line)."""

    def __init__(self, stream: TextIO, path: Path) -> None:
        super().__init__()
        self.stream, self.path = stream, path
        self.file = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - closed by close

    def writable(self) -> bool:
        """A tee is written to."""
        return True

    def write(self, text: str) -> int:
        """Write ``text`` to the stream and the file."""
        self.stream.write(text)
        if not self.file.closed:
            self.file.write(text)
        return len(text)

    def to_file(self, text: str) -> None:
        """Write ``text`` to the file alone."""
        if not self.file.closed:
            self.file.write(text)

    def flush(self) -> None:
        """Flush the stream and the file."""
        self.stream.flush()
        if not self.file.closed:
            self.file.flush()

    def isatty(self) -> bool:
        """Whether the stream is a terminal."""
        return on_a_terminal(self.stream)

    def fileno(self) -> int:
        """The stream's descriptor (a child process writes to the terminal, not the file)."""
        return self.stream.fileno()

    def close(self) -> None:
        """Close the file (the stream stays open)."""
        self.file.close()


class RunLog:
    """Where a run's routine lines go: :meth:`detail`."""

    def __init__(self, tee: Tee, verbose: bool) -> None:
        self.tee, self.verbose = tee, verbose

    @property
    def path(self) -> Path:
        """The run's ``train.log``."""
        return self.tee.path

    def detail(self, text: str) -> None:
        """A routine line (or lines): into ``train.log``, and onto the terminal when verbose."""
        if self.verbose:
            self.tee.stream.write(text + "\n")
            self.tee.stream.flush()
        self.tee.to_file(text + "\n")


@contextmanager
def run_log(run_dir: str | os.PathLike, verbose: bool) -> Iterator[RunLog]:
    """Tee standard output into ``<run_dir>/train.log`` while the run lasts; within a run that
    already tees into that file (a one-rank run trains in the launcher) the same tee is kept."""
    path = (Path(run_dir) / FILENAME).absolute()
    current = sys.stdout
    if isinstance(current, Tee) and current.path == path:
        yield RunLog(current, verbose)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tee = Tee(current, path)
    sys.stdout = tee
    try:
        yield RunLog(tee, verbose)
    finally:
        if sys.stdout is tee:
            sys.stdout = current
        tee.flush()
        tee.close()
