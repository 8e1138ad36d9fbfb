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
* :func:`default_threads` gives each rank ``allowed cores / local ranks`` threads (at least 1;
  the cores of this process's affinity mask, not the host's), the same on a quiet host and a
  busy one, so that a run's bits do not depend on the load.
"""

from __future__ import annotations

import os
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


def default_threads(local_ranks: int) -> int:
    """Intra-op threads per rank when ``dist.threads_per_rank=0``: the cores this process may
    run on shared by the ``local_ranks`` ranks of this host, at least 1. Not fewer when other
    processes keep cores busy: with passive waits more threads still gained on a loaded host
    (docs/results/busy_host-free-cores.json), and a count that followed the load would change
    a run's bits (float sums split differently) from one launch to the next."""
    return max(1, allowed_cores() // max(1, local_ranks))
