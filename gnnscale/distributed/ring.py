"""A bounded job ring in shared memory for the processes of one host.

Jobs are numbered ``0, 1, 2, ...`` (a caller's global order). Producers claim the next job to
make (:meth:`JobRing.claim_make`), make it, and put it into slot ``job mod slots`` once that
slot's previous job was taken (:meth:`JobRing.try_put`: back-pressure, the ring holds at most
``slots`` jobs). Consumers take jobs strictly in job order, whichever consumer asks first
(:meth:`JobRing.try_take`). A job is one or more int64 tensors, copied in and out.

The memory is one ``memfd`` (an anonymous shared-memory file): it has no name in ``/dev/shm``
or anywhere else, so nothing is left behind however a process ends (SIGKILL included); the
kernel frees it when the last process that maps it is gone. The creator's file descriptor is
opened by the others through ``/proc/<pid>/fd/<fd>`` (:meth:`JobRing.attach`), so every
process must be on the creator's host. Pages are allocated on first touch: a slot's size is
an upper bound, not a reservation.

Updates of the control block hold a lock (a thread lock, then ``flock`` on the process's own
open file, polled with a deadline so that a stopped peer ends in a :class:`TimeoutError`).
"""

from __future__ import annotations

import fcntl
import mmap
import os
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any

import torch

MAX_PARTS = 8
CTRL = 8  # int64 control words
C_STARTED, C_NEXT_MAKE, C_NEXT_TAKE = 0, 1, 2
META = 4  # per slot: state, job, turn (the only job that may enter next), producer
M_STATE, M_JOB, M_TURN, M_PRODUCER = range(META)
EMPTY, FULL, TAKEN = 0, 1, 2
STATS = 2  # float64 per process: jobs done, seconds spent on them
PAGE = 4096


def available() -> bool:
    """Whether this host can make a ring (Linux: ``memfd_create`` and ``/proc``)."""
    return hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd")


def _round_up(n: int, to: int = PAGE) -> int:
    return (n + to - 1) // to * to


class Backoff:
    """Sleeps that grow from 50 us to 2 ms while nothing changes; :meth:`reset` on progress."""

    def __init__(self) -> None:
        self.delay = 5e-5

    def sleep(self) -> None:
        """Wait a little longer than last time."""
        time.sleep(self.delay)
        self.delay = min(self.delay * 2, 2e-3)

    def reset(self) -> None:
        """Something changed: poll quickly again."""
        self.delay = 5e-5


class JobRing:
    """``slots`` job slots of ``slot_bytes`` each, shared by ``procs`` processes of one host
    (each has a row of statistics, :meth:`add_stats`). Make one with :meth:`create`, open it
    in the other processes with :meth:`attach` (the creator's :attr:`handle`)."""

    def __init__(self, fd: int, slots: int, slot_bytes: int, procs: int, timeout_s: float,
                 creator: bool) -> None:
        self.slots, self.slot_bytes, self.procs = slots, _round_up(slot_bytes), procs
        self.timeout_s = timeout_s
        self._fd, self.creator = fd, creator
        meta_at = CTRL * 8
        stats_at = meta_at + slots * META * 8
        self._data_at = _round_up(stats_at + procs * STATS * 8)
        size = self._data_at + slots * self.slot_bytes
        if creator:
            os.ftruncate(fd, size)
        self._mm = mmap.mmap(fd, size)
        self._ctrl = torch.frombuffer(self._mm, dtype=torch.int64, count=CTRL, offset=0)
        self._meta = torch.frombuffer(self._mm, dtype=torch.int64, count=slots * META,
                                      offset=meta_at).view(slots, META)
        self._stats = torch.frombuffer(self._mm, dtype=torch.float64, count=procs * STATS,
                                       offset=stats_at).view(procs, STATS)
        self._thread_lock = threading.Lock()

    # -- making and opening ---------------------------------------------------------------------
    @classmethod
    def create(cls, slots: int, slot_bytes: int, procs: int, timeout_s: float) -> JobRing:
        """A new, empty ring in this process."""
        if slots < 1 or slot_bytes < 64:
            raise ValueError(f"a JobRing needs slots >= 1 and slot_bytes >= 64, got {slots} "
                             f"and {slot_bytes}")
        fd = os.memfd_create("gnnscale-ring", os.MFD_CLOEXEC)
        return cls(fd, slots, slot_bytes, procs, timeout_s, creator=True)

    @property
    def handle(self) -> tuple[int, int]:
        """``(pid, fd)`` another process of this host passes to :meth:`attach`."""
        return os.getpid(), self._fd

    @classmethod
    def attach(cls, handle: tuple[int, int], slots: int, slot_bytes: int, procs: int,
               timeout_s: float) -> JobRing:
        """Open the ring whose creator's :attr:`handle` is ``handle`` (same host, creator alive)."""
        pid, fd = handle
        try:
            own = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR | os.O_CLOEXEC)
        except OSError as err:
            raise RuntimeError(f"cannot open the shared job ring of process {pid} ({err}): "
                               "every process must run on the creator's host") from err
        return cls(own, slots, slot_bytes, procs, timeout_s, creator=False)

    def close(self) -> None:
        """Unmap and close this process's view (the memory goes with the last process)."""
        if self._fd < 0:
            return
        self._ctrl = self._meta = self._stats = None
        try:
            self._mm.close()
        except BufferError:  # a view is still referenced: the mapping goes at exit
            pass
        os.close(self._fd)
        self._fd = -1

    # -- locking and waiting --------------------------------------------------------------------
    @contextmanager
    def _locked(self):
        deadline = time.monotonic() + self.timeout_s
        backoff = Backoff()
        if not self._thread_lock.acquire(timeout=self.timeout_s):
            raise TimeoutError(f"job ring: timed out after {self.timeout_s:g} s waiting for its "
                               "lock (dist.timeout_s)")
        try:
            while True:
                try:
                    fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"job ring: timed out after {self.timeout_s:g} s "
                                           "waiting for its lock, held by a process that "
                                           "stopped (dist.timeout_s)") from None
                    backoff.sleep()
            try:
                yield
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._thread_lock.release()

    def wait(self, attempt: Callable[[], Any], progress: Callable[[], Any], what: str,
             idle: Callable[[], None] | None = None) -> Any:
        """Call ``attempt`` until it returns something other than None; between attempts run
        ``idle`` (or sleep). Raises :class:`TimeoutError` when ``progress()`` (a value that
        changes as the ring moves) stayed the same for the ring's timeout."""
        backoff = Backoff()
        seen, since = progress(), time.monotonic()
        while True:
            got = attempt()
            if got is not None:
                return got
            now_seen = progress()
            if now_seen != seen:
                seen, since = now_seen, time.monotonic()
                backoff.reset()
            elif time.monotonic() - since > self.timeout_s:
                raise TimeoutError(f"job ring: timed out after {self.timeout_s:g} s waiting "
                                   f"for {what}: the ring did not move (dist.timeout_s)")
            if idle is not None:
                idle()
            backoff.sleep()

    # -- the job order ------------------------------------------------------------------------
    def start(self, first: int) -> None:
        """Number the jobs from ``first`` (the first call in any process decides; later calls
        do nothing)."""
        with self._locked():
            if self._ctrl[C_STARTED]:
                return
            self._ctrl[C_NEXT_MAKE] = first
            self._ctrl[C_NEXT_TAKE] = first
            for r in range(self.slots):
                self._meta[r, M_TURN] = first + (r - first) % self.slots
                self._meta[r, M_STATE] = EMPTY
            self._ctrl[C_STARTED] = 1

    def claim_make(self, end: int) -> int | None:
        """The next job to make, below ``end``; None when every job below ``end`` is claimed."""
        with self._locked():
            job = int(self._ctrl[C_NEXT_MAKE])
            if job >= end:
                return None
            self._ctrl[C_NEXT_MAKE] = job + 1
            return job

    @property
    def next_take(self) -> int:
        """The job the next :meth:`try_take` returns (every job before it is taken)."""
        return int(self._ctrl[C_NEXT_TAKE])

    def ready(self) -> int:
        """Jobs in the ring, made and not yet taken."""
        return int((self._meta[:, M_STATE] == FULL).sum())

    def head_ready(self) -> bool:
        """Whether the next job to take is in the ring."""
        job = self.next_take
        r = job % self.slots
        return int(self._meta[r, M_STATE]) == FULL and int(self._meta[r, M_JOB]) == job

    # -- putting and taking ---------------------------------------------------------------------
    def _data(self, slot: int, count: int, offset: int = 0) -> torch.Tensor:
        return torch.frombuffer(self._mm, dtype=torch.int64, count=count,
                                offset=self._data_at + slot * self.slot_bytes + offset)

    def try_put(self, job: int, parts: Sequence[torch.Tensor], producer: int) -> bool:
        """Copy job ``job`` (int64 tensors) into its slot if the slot is free for it; False when
        the slot still holds an earlier job (the ring is full up to ``job``)."""
        r = job % self.slots
        with self._locked():
            if int(self._meta[r, M_TURN]) != job or int(self._meta[r, M_STATE]) != EMPTY:
                return False
        sizes = [p.numel() for p in parts]
        need = (1 + MAX_PARTS + sum(sizes)) * 8
        if len(parts) > MAX_PARTS or need > self.slot_bytes:
            raise ValueError(f"job of {need / 2**20:.1f} MiB in {len(parts)} parts does not fit "
                             f"a ring slot of {self.slot_bytes / 2**20:.1f} MiB and "
                             f"{MAX_PARTS} parts")
        head = self._data(r, 1 + MAX_PARTS)
        head[0] = len(parts)
        head[1: 1 + len(parts)] = torch.tensor(sizes, dtype=torch.int64)
        pos = (1 + MAX_PARTS) * 8
        for p, n in zip(parts, sizes):
            if n:
                self._data(r, n, pos).copy_(p.reshape(-1))
            pos += n * 8
        with self._locked():  # publish: the data above is written before the state says so
            self._meta[r, M_JOB] = job
            self._meta[r, M_PRODUCER] = producer
            self._meta[r, M_STATE] = FULL
        return True

    def try_take(self, end: int) -> tuple[int, list[torch.Tensor]] | None:
        """``(job, parts)`` of the next job (copies), if it is below ``end`` and in the ring."""
        with self._locked():
            job = int(self._ctrl[C_NEXT_TAKE])
            r = job % self.slots
            if (job >= end or int(self._meta[r, M_STATE]) != FULL
                    or int(self._meta[r, M_JOB]) != job):
                return None
            self._meta[r, M_STATE] = TAKEN
            self._ctrl[C_NEXT_TAKE] = job + 1
        head = self._data(r, 1 + MAX_PARTS)
        sizes = head[1: 1 + int(head[0])].tolist()
        parts, pos = [], (1 + MAX_PARTS) * 8
        for n in sizes:
            parts.append(self._data(r, n, pos).clone() if n else
                         torch.empty(0, dtype=torch.int64))
            pos += n * 8
        with self._locked():  # the slot is free for job + slots
            self._meta[r, M_STATE] = EMPTY
            self._meta[r, M_TURN] = job + self.slots
        return job, parts

    # -- statistics every process can read ----------------------------------------------------
    def add_stats(self, proc: int, jobs: float, seconds: float) -> None:
        """Add to process ``proc``'s row (only that process writes it)."""
        self._stats[proc, 0] += jobs
        self._stats[proc, 1] += seconds

    def stats(self) -> torch.Tensor:
        """A copy of every process's ``(jobs, seconds)``."""
        return self._stats.clone()
