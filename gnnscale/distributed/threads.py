"""How many intra-op threads a rank gets, and how they wait: no cliff on a busy host.

Torch-free: the launcher calls these before torch is imported. Two causes of one cliff
(docs/distributed.md, "Threads on a busy host"):

* torch's intra-op pool is OpenMP (libgomp): a thread that finishes its share of a parallel
  region spins (300k spins, ~3 ms) waiting for the others. When another process keeps a core
  busy, a rank's thread on that core is descheduled and the spinning ones take the core it
  needs: ``experiment=cora_gae`` on a loaded 2-core host took 28x longer per epoch with 2
  threads than with 1. :func:`quiet_waits` sets ``OMP_WAIT_POLICY=PASSIVE`` (a waiting thread
  sleeps) for the launcher and every rank, before any of them loads torch: libgomp reads it
  once, when it is loaded. A value the user set (``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``) is
  kept.
* A static split of each region over more threads than free cores waits for the slowest share:
  :func:`default_threads` gives each rank ``free cores / local ranks`` threads (at least 1),
  the free cores being this process's allowed cores less what other processes keep running,
  sampled at launch from ``/proc/loadavg``'s runnable count (this process tree excluded).
"""

from __future__ import annotations

import os
import time
from collections.abc import MutableMapping

#: The wait policy a rank's OpenMP threads get unless the user chose one.
WAIT_POLICY = "PASSIVE"


def quiet_waits(environ: MutableMapping[str, str] | None = None) -> bool:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` in ``environ`` (default: this process's) unless a wait
    policy or spin count is set already; True when set. Effective only in processes that load
    torch afterwards (its libgomp reads it at load time)."""
    env = os.environ if environ is None else environ
    if "OMP_WAIT_POLICY" in env or "GOMP_SPINCOUNT" in env:
        return False
    env["OMP_WAIT_POLICY"] = WAIT_POLICY
    return True


def allowed_cores() -> int:
    """The cores this process may run on (its affinity mask; ``os.cpu_count()`` elsewhere)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _tasks(pid: str) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def _own_running() -> int:
    """Threads of this process and its children (``/proc/<pid>/task/<tid>/children``) in
    state R (running or runnable) now; at least 1 (the caller)."""
    me = str(os.getpid())
    pids, running = [me], 0
    for tid in _tasks(me):
        try:
            with open(f"/proc/{me}/task/{tid}/children") as f:
                pids += f.read().split()
        except OSError:
            continue
    for pid in pids:
        for tid in _tasks(pid):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    running += f.read().rsplit(")", 1)[1].split()[0] == "R"
            except (OSError, IndexError):
                continue
    return max(1, running)


def busy_elsewhere(samples: int = 3, interval_s: float = 0.005) -> float:
    """How many cores other processes keep running now: the median over ``samples`` reads of
    ``/proc/loadavg``'s runnable count, less this process tree's running threads (0 where
    ``/proc`` is absent). Host-wide: on a host with more cores than this process may use,
    the share that falls on its cores is assumed proportional."""
    counts = []
    for i in range(samples):
        try:
            with open("/proc/loadavg") as f:
                runnable = int(f.read().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return 0.0
        counts.append(max(0, runnable - _own_running()))
        if i + 1 < samples:
            time.sleep(interval_s)
    others = sorted(counts)[len(counts) // 2]
    host = os.cpu_count() or 1
    return others * allowed_cores() / host


def default_threads(local_ranks: int) -> int:
    """Intra-op threads per rank when ``dist.threads_per_rank=0``: the free cores (allowed
    cores less those busy elsewhere, at least 1) shared by the ``local_ranks`` ranks of this
    host, at least 1."""
    free = max(1, allowed_cores() - round(busy_elsewhere()))
    return max(1, free // max(1, local_ranks))
