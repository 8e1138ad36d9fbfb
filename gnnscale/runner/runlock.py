"""One run folder, one run: the launcher holds an exclusive ``flock`` on ``<run_dir>/.run.lock``
while its run trains, so a second run given the same folder is refused, naming the process
(pid and host) that holds it, instead of interleaving ``metrics.jsonl`` and overwriting the
checkpoint.

The kernel releases the lock when the holder dies, however it dies (a SIGKILLed launcher's
lock does not outlive it); a run that ends removes the file. A run that resumes in the folder
after the first ended takes the lock again. The lock is re-entrant within one process (a meta
strategy runs its concrete configs through :func:`gnnscale.runner.run.run` again).
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gnnscale.errors import ConfigError

#: The lock file's name inside the run folder (removed when the run ends).
LOCK_NAME = ".run.lock"

_held: dict[str, int] = {}  # run folder (real path) -> re-entry depth, in this process


def _holder(path: Path) -> str:
    """Who holds ``path``'s lock, as its holder wrote it (``process PID on HOST``)."""
    try:
        pid, _, host = path.read_text().strip().partition(" ")
    except OSError:
        pid, host = "", ""
    return f"process {pid} on {host}" if pid.isdigit() and host else "another process"


def _acquire(path: Path) -> int:
    """An open descriptor of ``path`` holding its exclusive lock (raises ConfigError when held
    elsewhere). Retries when the file was removed between opening and locking it."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConfigError(f"run folder {path.parent} is in use by {_holder(path)} (another "
                              "run trains there): wait for it to end, or give this run its own "
                              "folder (hydra.run.dir=...)") from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # its holder removed it as we opened it: lock the new one


@contextmanager
def run_folder_lock(run_dir: str | Path) -> Iterator[None]:
    """Hold ``run_dir``'s lock for the ``with`` block (``run_dir`` exists); refused with a
    :class:`ConfigError` naming the holder when another process holds it."""
    key = os.path.realpath(run_dir)
    if key in _held:
        _held[key] += 1
        try:
            yield
        finally:
            _held[key] -= 1
        return
    path = Path(run_dir) / LOCK_NAME
    fd = _acquire(path)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        _held[key] = 1
        yield
    finally:
        _held.pop(key, None)
        try:
            path.unlink()  # while still locked: a waiting run retries on the new file
        except FileNotFoundError:
            pass
        os.close(fd)
