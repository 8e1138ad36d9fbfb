"""How many intra-op threads a rank gets, and how they wait: no cliff on a busy host.

Torch-free: the launcher calls these before torch is imported (docs/distributed.md, "Threads
on a busy host"):

* torch's intra-op pool is OpenMP (libgomp): a thread that finishes its share of a parallel
  region spins (300k spins, ~3 ms) waiting for the others. When another process keeps a core
  busy, a rank's thread on that core is descheduled and the spinning ones take the core it
  needs: ``experiment=cora_gae`` on a loaded 2-core host took 28x longer per epoch with 2
  threads than with 1. :func:`quiet_waits` sets ``OMP_WAIT_POLICY=PASSIVE`` (a waiting thread
  sleeps) for the launcher and every rank, before any of them loads torch: libgomp reads it
  once, when it is loaded. A value the user set (``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``) is
  kept.
* :func:`default_threads` gives each rank ``free cores / local ranks`` threads (at least 1):
  the cores of this process's affinity mask (not the host's) less those that other processes
  keep busy right now (:func:`busy_cores`: ``/proc/stat`` over 50 ms). With one core of two
  kept busy a 1-rank run's 2 passive-waiting threads were still 1.03-1.21x slower than one
  thread (docs/results/busy_host-quiet.json); a rank's threads never outnumber the cores it
  can have. The count a run chose is kept in its checkpoint and a resumed run takes it again
  (``gnnscale/runner/worker.py``), so a resume is bit-identical whatever the load then; two
  fresh launches on differently loaded hosts may differ in float-sum order: set
  ``dist.threads_per_rank`` to pin it.
"""

from __future__ import annotations

import os
import time
from collections.abc import MutableMapping
from pathlib import Path

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


#: How long :func:`busy_cores` watches the cores (5 scheduler ticks at 100 Hz).
BUSY_WINDOW_S = 0.05


def _cpu_ticks(cpus: set[int]) -> tuple[int, int] | None:
    """``(busy, total)`` jiffies summed over ``cpus`` from ``/proc/stat`` (None: unreadable)."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    busy = total = 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        ticks = [int(v) for v in rest.split()]
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
        total += sum(ticks[:8])  # guest time is already in user time
        busy += sum(ticks[:8]) - idle
    return busy, total


def _own_ticks() -> int:
    """Jiffies this process (all its threads) has run, from ``/proc/self/stat``."""
    try:
        fields = Path("/proc/self/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime, stime


def busy_cores(window_s: float = BUSY_WINDOW_S) -> int:
    """The cores of this process's affinity mask that other processes kept busy over the
    last ``window_s`` seconds (rounded: a core spinning the whole window counts 1, background
    blips 0); 0 where ``/proc/stat`` cannot be read."""
    try:
        cpus = set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return 0
    first, own0 = _cpu_ticks(cpus), _own_ticks()
    if first is None:
        return 0
    time.sleep(window_s)
    last, own1 = _cpu_ticks(cpus), _own_ticks()
    if last is None or last[1] <= first[1]:
        return 0
    busy = max(0, (last[0] - first[0]) - (own1 - own0))
    per_core = (last[1] - first[1]) / len(cpus)  # jiffies one core had in the window
    return min(len(cpus), int(busy / per_core + 0.5))


def default_threads(local_ranks: int, busy: int | None = None) -> int:
    """Intra-op threads per rank when ``dist.threads_per_rank=0``: the cores this process may
    run on, less ``busy`` (default: :func:`busy_cores`, measured now), shared by the
    ``local_ranks`` ranks of this host; at least 1."""
    busy = busy_cores() if busy is None else busy
    return max(1, (allowed_cores() - busy) // max(1, local_ranks))
