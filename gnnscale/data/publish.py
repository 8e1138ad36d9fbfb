"""Publishing a finished folder atomically: the first complete copy wins, readers never see a gap.

A folder is complete when its ``marker`` file (written last) exists. A complete copy is never
removed by a later writer; only an explicit ``replace`` swaps it, in one atomic exchange where
the kernel offers one (Linux ``renameat2``), so a reader sees the old or the new folder.
Published folders get the usual permissions (``0777 & ~umask``), not ``mkdtemp``'s 0700.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
import tempfile
from pathlib import Path

AT_FDCWD = -100
RENAME_EXCHANGE = 2


def default_dir_mode() -> int:
    """``0o777`` less this process's umask (what ``mkdir`` would give)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o777 & ~mask


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux); False when the kernel or libc cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b),
                              RENAME_EXCHANGE) == 0
    except (OSError, AttributeError):
        return False


def _discard(folder: Path) -> None:
    """Remove ``folder`` (renamed aside first, so nobody reads it half-deleted)."""
    aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old.", dir=folder.parent))
    try:
        os.replace(folder, aside / "x")
    except OSError:
        pass
    shutil.rmtree(aside, ignore_errors=True)


def publish_folder(tmp: Path, path: Path, marker: str, replace: bool = False) -> bool:
    """Move the finished folder ``tmp`` to ``path``; True when ``tmp`` became ``path``.

    When a complete copy is there already (or appears meanwhile) it is kept and ``tmp`` is
    discarded, unless ``replace``. A leftover of an interrupted save (no ``marker``) is removed.
    """
    os.chmod(tmp, default_dir_mode())
    if path.exists() and not (path / marker).is_file():
        _discard(path)
    if replace and (path / marker).is_file() and _exchange(tmp, path):
        shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the old copy
        return True
    try:
        os.rename(tmp, path)  # fails when a (complete) copy is there: it wins
        return True
    except OSError:
        if not (path / marker).is_file():
            raise
    if replace:  # no atomic exchange here: a short gap is unavoidable
        _discard(path)
        try:
            os.rename(tmp, path)
            return True
        except OSError:
            if not (path / marker).is_file():
                raise
    shutil.rmtree(tmp, ignore_errors=True)
    return False
