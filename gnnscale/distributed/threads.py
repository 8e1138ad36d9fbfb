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
* :func:`bind_rank` binds each spawned rank to its own block of cores (``dist.bind_cores``):
  an unbound rank's threads migrate between cores and meet its peers' (and their sampling
  threads') on them, so every collective waits for a peer the scheduler happened to delay;
  bound, the all-to-all waits of a 2-rank run on 2 cores are 2.3x shorter (``python -m
  benchmarks binding``). Only the free cores (:func:`host_load`) are handed out; more ranks
  than blocks share them round-robin; the cores are the launcher's to give, so processes a
  rank starts (sampler workers) take the whole set back (:func:`unbind`).
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
    return host_load(window_s)[0]


def _core_ticks(cpus: set[int]) -> dict[int, tuple[int, int]] | None:
    """Per core of ``cpus``: ``(busy, total)`` jiffies from ``/proc/stat`` (None: unreadable)."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    out = {}
    for line in lines:
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        ticks = [int(v) for v in rest.split()]
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
        out[int(name[3:])] = (sum(ticks[:8]) - idle, sum(ticks[:8]))
    return out


def host_load(window_s: float = BUSY_WINDOW_S) -> tuple[int, list[int]]:
    """One look at the cores of this process's affinity mask over ``window_s`` seconds:
    ``(busy, free)``, the cores other processes kept busy (as :func:`busy_cores`) and the
    cores that were mostly idle, idlest first (every allowed core where ``/proc/stat`` cannot
    be read)."""
    try:
        cpus = set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return 0, list(range(os.cpu_count() or 1))
    first, own0 = _core_ticks(cpus), _own_ticks()
    if not first:
        return 0, sorted(cpus)
    time.sleep(window_s)
    last, own1 = _core_ticks(cpus), _own_ticks()
    if not last or set(last) != set(first):
        return 0, sorted(cpus)
    share = {}
    for c in first:
        ran, ticks = last[c][0] - first[c][0], last[c][1] - first[c][1]
        share[c] = ran / ticks if ticks > 0 else 0.0
    per_core = sum(last[c][1] - first[c][1] for c in first) / len(first)
    others = sum(last[c][0] - first[c][0] for c in first) - (own1 - own0)
    busy = min(len(cpus), int(max(0, others) / per_core + 0.5)) if per_core > 0 else 0
    free = sorted((c for c in share if share[c] < 0.5), key=lambda c: (share[c], c))
    return busy, free


def rank_cores(local_rank: int, threads: int, cores: list[int]) -> list[int]:
    """The block of ``threads`` cores of ``cores`` (ascending) that local rank ``local_rank``
    runs on: rank ``r`` takes block ``r``; past the last whole block, ranks share the blocks
    round-robin (a block is all of ``cores`` when ``threads`` exceeds them)."""
    cores = sorted(cores)
    threads = max(1, min(threads, len(cores)))
    slot = local_rank % max(1, len(cores) // threads)
    return cores[slot * threads:(slot + 1) * threads]


def binding(world: int, threads: int, load: tuple[int, list[int]] | None = None
            ) -> list[int] | None:
    """The cores to bind ``world`` spawned ranks of ``threads`` threads to (None: leave them
    unbound), from ``load`` (:func:`host_load`, measured now when not given): the free cores
    when the ranks' threads fit in them; every allowed core, shared round-robin
    (:func:`rank_cores`), when only the run's own ranks outnumber them; never onto cores that
    other work keeps busy."""
    busy, free = host_load() if load is None else load
    if world * threads <= len(free):
        return free
    try:
        every = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    return every if busy == 0 else None


#: The cores a launcher gave its ranks (comma-separated), for the processes a rank starts.
HOST_CORES_ENV = "GNNSCALE_HOST_CORES"


def bind_rank(local_rank: int, threads: int, cores: list[int]) -> list[int] | None:
    """Bind this process (a spawned rank) to its block of ``cores`` (:func:`rank_cores`) and
    remember ``cores`` for the processes it starts; the block, or None where affinity cannot
    be set."""
    mine = rank_cores(local_rank, threads, cores)
    try:
        os.sched_setaffinity(0, mine)
    except (AttributeError, OSError, ValueError):
        return None
    os.environ[HOST_CORES_ENV] = ",".join(str(c) for c in sorted(cores))
    return mine


def unbind() -> None:
    """In a process a bound rank started (a sampler worker): run on the launcher's cores again,
    not only on the rank's block (nothing to do where no rank was bound)."""
    given = os.environ.get(HOST_CORES_ENV)
    if not given:
        return
    try:
        os.sched_setaffinity(0, {int(c) for c in given.split(",")})
    except (AttributeError, OSError, ValueError):
        pass


def default_threads(local_ranks: int, busy: int | None = None) -> int:
    """Intra-op threads per rank when ``dist.threads_per_rank=0``: the cores this process may
    run on, less ``busy`` (default: :func:`busy_cores`, measured now), shared by the
    ``local_ranks`` ranks of this host; at least 1."""
    busy = busy_cores() if busy is None else busy
    return max(1, (allowed_cores() - busy) // max(1, local_ranks))
