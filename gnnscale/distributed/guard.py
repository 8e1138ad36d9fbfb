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


def _watch(parent_pid: int, grace_s: float) -> None:
    orphaned_at = None
    while True:
        time.sleep(POLL_S)
        if orphaned_at is None and os.getppid() != parent_pid:
            orphaned_at = time.monotonic()
            os.kill(os.getpid(), signal.SIGTERM)  # the fallback when no death signal came
        began = min([*_stopping, *([orphaned_at] if orphaned_at else [])], default=None)
        if began is not None and time.monotonic() - began > grace_s:
            _kill_children()
            os._exit(128 + signal.SIGTERM)  # stuck in native code: end without unwinding


def guard_rank(parent_pid: int, grace_s: float = 5.0) -> None:
    """Tie this rank's life to ``parent_pid`` (call first thing in the rank's main thread)."""
    _stopping.clear()
    signal.signal(signal.SIGTERM, _raise_terminated)
    _set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent_pid:  # the launcher died before the death signal was set
        raise Terminated(signal.SIGTERM)
    threading.Thread(target=_watch, args=(parent_pid, grace_s), name="gnnscale-parent-watch",
                     daemon=True).start()


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
