"""Publishing a finished folder atomically: the first complete copy wins, readers never see a gap.

A folder is complete when its ``marker`` file (written last) exists. A complete copy is never
removed by a later writer; only an explicit ``replace`` swaps it, in one atomic exchange where
the kernel offers one (Linux ``renameat2``), so a reader sees the old or the new folder.
Published folders get the usual permissions (``0777 & ~umask``), not ``mkdtemp``'s 0700.

A folder is built in :func:`temp_folder`, ``.<name>.tmp<pid>@<host>.<random>`` beside its
final place; one left by a process that was killed (SIGKILL, a crash, a power cut) is removed
by the next :func:`temp_folder` for the same place (:func:`sweep_temp`): only when its host is
this one and its pid is not alive, so a live writer's folder (of this host or of another
host sharing the file system) is never touched.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import socket
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


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())[:64] or "host"


def _owner_tag(kind: str) -> str:
    return f"{kind}{os.getpid()}@{_host()}."


def sweep_temp(path: Path) -> list[Path]:
    """Remove the temp folders (and files) of ``path`` -- ``.<name>.tmp<pid>@<host>.*`` and
    ``.<name>.old<pid>@<host>.*``, and the host-less ``.<name>.tmp<pid>`` that earlier versions
    wrote -- whose process, on this host, is gone; returns them."""
    pattern = re.compile(re.escape(f".{path.name}.") + r"(?:tmp|old)(\d+)(?:@([^.]+)\.|$)")
    removed: list[Path] = []
    try:
        entries = list(path.parent.iterdir())
    except OSError:
        return removed
    host = _host()
    for entry in entries:
        m = pattern.match(entry.name)
        if not m or (m.group(2) or host) != host or pid_alive(int(m.group(1))):
            continue
        try:
            if entry.lstat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry)
    return removed


def temp_path(path: Path, suffix: str) -> Path:
    """A name beside ``path`` for a file this process builds (``.<name>.tmp<pid>@<host>.
    <suffix>``, swept by the next writer if this one dies); stale ones are removed first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_temp(path)
    return path.parent / f".{path.name}.{_owner_tag('tmp')}{suffix}"


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader (or a run killed mid-write) sees the old
    file or the whole new one, never a truncated one."""
    tmp = temp_path(path, ".part")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def temp_folder(path: Path) -> Path:
    """A new folder beside ``path`` to build it in, named after this process (swept by the
    next writer if this one dies); stale ones of dead writers are removed first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_temp(path)
    return Path(tempfile.mkdtemp(prefix=f".{path.name}.{_owner_tag('tmp')}", dir=path.parent))


def _discard(folder: Path) -> None:
    """Remove ``folder`` (renamed aside first, so nobody reads it half-deleted)."""
    aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.{_owner_tag('old')}",
                                  dir=folder.parent))
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
