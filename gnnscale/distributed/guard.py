"""No orphaned ranks: a rank ends within seconds of its launcher's death, however it died.

On Linux the kernel sends the rank SIGTERM when its parent dies (``PR_SET_PDEATHSIG``); a
watchdog thread that polls the parent pid is the fallback everywhere. SIGTERM raises
:class:`Terminated` in the rank's main thread, so ``finally`` blocks run (sampler workers are
stopped, the process group destroyed); a rank stuck in native code is ended after a grace
period. The launcher turns SIGTERM/SIGHUP into :class:`Terminated` too, stops its ranks and
exits non-zero.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

PR_SET_PDEATHSIG = 1
POLL_S = 0.2


class Terminated(SystemExit):
    """This process was asked to stop by a signal; exit status 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum

    def __str__(self) -> str:
        return f"stopped by {signal.Signals(self.signum).name}"


_stopping: list[float] = []  # when this process began to stop (rank side)


def _raise_terminated(signum: int, _frame: object) -> None:
    if _stopping:
        return  # already unwinding: let the finally blocks finish
    _stopping.append(time.monotonic())
    raise Terminated(signum)


def _set_parent_death_signal(signum: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _kill_children() -> None:
    """SIGKILL this process's children (Linux ``/proc``), so a hard exit orphans nobody."""
    me = str(os.getpid())
    try:
        entries = os.listdir("/proc")
    except OSError:
        return
    for pid in filter(str.isdigit, entries):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = f.read().rsplit(")", 1)[1].split()[1]
            if ppid == me:
                os.kill(int(pid), signal.SIGKILL)
        except (OSError, IndexError, ValueError):
            continue


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    except OSError:  # no /proc (macOS): a signal 0 tells whether it exists at all
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _watch(parent_pid: int, grace_s: float, launcher_pid: int | None) -> None:
    orphaned_at = None
    while True:
        time.sleep(POLL_S)
        gone = os.getppid() != parent_pid or (launcher_pid is not None
                                               and not _alive(launcher_pid))
        if orphaned_at is None and gone:
            orphaned_at = time.monotonic()
            os.kill(os.getpid(), signal.SIGTERM)  # the fallback when no death signal came
        began = min([*_stopping, *([orphaned_at] if orphaned_at else [])], default=None)
        if began is not None and time.monotonic() - began > grace_s:
            _kill_children()
            os._exit(128 + signal.SIGTERM)  # stuck in native code: end without unwinding


def guard_rank(parent_pid: int, grace_s: float = 5.0, launcher_pid: int | None = None) -> None:
    """Tie this rank's life to ``parent_pid`` and, when given, to ``launcher_pid`` (a rank
    started by a fork server has the server as its parent); call first thing in the rank's
    main thread."""
    _stopping.clear()
    signal.signal(signal.SIGTERM, _raise_terminated)
    _set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent_pid or (launcher_pid is not None and not _alive(launcher_pid)):
        raise Terminated(signal.SIGTERM)  # the launcher died before the death signal was set
    threading.Thread(target=_watch, args=(parent_pid, grace_s, launcher_pid),
                     name="gnnscale-parent-watch", daemon=True).start()


@contextmanager
def launcher_signals() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise :class:`Terminated` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signums = (signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.getsignal(s) for s in signums}

    def stop(signum: int, _frame: object) -> None:
        raise Terminated(signum)

    for s in signums:
        signal.signal(s, stop)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
