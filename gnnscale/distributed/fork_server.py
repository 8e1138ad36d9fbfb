"""What the rank fork server imports first (:data:`~gnnscale.distributed.launch.PRELOAD`).

The fork server exits once its launcher is gone; each rank it started then gets SIGTERM from
the kernel (``PR_SET_PDEATHSIG``, :func:`~gnnscale.distributed.guard.guard_rank`). A stopped
rank (SIGSTOP, a debugger) would hold that signal pending, stopped, for ever; so on its way
out the server sends every stopped rank of its own SIGTERM and continues it, and it unwinds
like its running peers. Imported by the fork server alone (its children inherit the module,
not the duty: the handler acts only in the server's own process).
"""

from __future__ import annotations

import atexit
import os
import signal
import sys

from gnnscale.distributed.guard import children, is_stopped
from gnnscale.lazy import eager_imports

_SERVER = os.getpid()
if "torch" not in sys.modules:  # the server's first preload (registry.import_all comes later)
    eager_imports()  # so it runs torch._dynamo's body once, not each forked rank (DDP reads it)


def continue_stopped_children() -> list[int]:
    """SIGTERM and SIGCONT every stopped child of this process; returns their pids."""
    woken = []
    for pid in children():
        if is_stopped(pid):
            try:
                os.kill(pid, signal.SIGTERM)
                os.kill(pid, signal.SIGCONT)
                woken.append(pid)
            except ProcessLookupError:
                continue
    return woken


def _at_exit() -> None:
    if os.getpid() == _SERVER:
        continue_stopped_children()


atexit.register(_at_exit)
