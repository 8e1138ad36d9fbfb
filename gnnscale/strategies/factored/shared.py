"""The shared queue of ``strategy=factored`` (``strategy.queue=shared``): rings any taker
takes from.

The ranks of a host open its :class:`~gnnscale.distributed.ring.JobRing` (one per host with
trainers, fed over the network where the host has no samplers of its own:
:mod:`~gnnscale.strategies.factored.hosts`, :mod:`~gnnscale.strategies.factored.relay`; one
ring on one host). A step is J = m * T jobs (GNNLab's micro-batching of a step: m is
``strategy.jobs_per_trainer``), so that a faster trainer takes more of a step's jobs even at
``staleness=0``. Job ``(step, slot)`` is the draw ``schedule.draw(epoch, step, slot)`` of the
run's schedule with J slots (``data``'s micro-batch with J ranks) by whichever sampler claims it
next (:meth:`~gnnscale.distributed.ring.JobRing.claim_make`); it goes to the ring of trainer
``slot mod T``'s host, numbered ``(epoch * steps + step) * J_h + i`` there for the host's i-th
of its J_h slots, and the host's trainers take jobs in that order, whichever is free first. A
ring holds ``queue_depth * J_h`` jobs.

**Exact whoever trains what.** A rank trains job ``(step, slot)`` with the parameters after
the updates of steps ``0 .. step - 1 - staleness`` (never more, never fewer), and puts the
gradient of ``loss / J`` in row ``slot`` of the step's buffer (zeros elsewhere). The buffer is
summed over the takers (one non-zero row per slot, so the sum is exact) and the rows are then
added in slot order, so a step's gradient is the same bits whichever taker trained which job;
with ``staleness=0`` it is ``data``'s step with J ranks. Every taker applies every step's
update, in step order. A typed model's sparse embedding tables (featureless node types) stay
out of the rows: each job's looked-up rows and their gradients are kept by slot, and as a step
is applied the takers all-gather them on a group of their own and put them in slot order
(:mod:`gnnscale.distributed.sparse`), so the tables' gradient does not depend on who trained
what either. A rank launches a step's reduction as soon as it holds no job of that
step and every job of it is taken.

**Prefetch.** A trainer claims up to ``strategy.prefetch`` jobs ahead of the one it trains,
in a thread that copies them out of the ring and gathers their features (the feature store),
so extraction of the next job overlaps training of this one. With m > 1 the last T_h - 1 jobs
of a step are claimed only by a trainer that holds no other job (:class:`Feeder`).

**Switching** (``strategy.switching=true``) at any point of the epoch: a sampler that cannot
put its job (the ring is full) or has sampled its share takes the next job and trains it when
GNNLab's profit ``P = M_r * T_t / N_t - T_t'`` is positive, with ``M_r`` the epoch's jobs not
yet taken (GNNLab's queue holds the whole epoch; here the unsampled ones wait for the
trainers too), ``N_t`` the trainers, ``T_t`` their mean seconds per job so far and ``T_t'`` its
own.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from gnnscale.distributed import device as device_seam
from gnnscale.distributed.collectives import gather_rows
from gnnscale.distributed.ring import JobRing
from gnnscale.distributed.sparse import flat_sparse, set_sparse, table_rows
from gnnscale.distributed.topology import run_timeout
from gnnscale.sampling.base import MiniBatch
from gnnscale.strategies.factored.hosts import HostJobs
from gnnscale.strategies.factored.protocol import FactoredRun
from gnnscale.strategies.factored.queue import unpack
from gnnscale.strategies.factored.relay import Relay, Requests, make_job
from gnnscale.strategies.factored.sync import StepStats, _profit, grad_copies, train_job

EXTRA = 3  # per slot: loss, the trainer's seconds, 1 when a trainer trained it
_DONE = object()


def open_ring(strat: FactoredRun) -> JobRing | None:
    """This host's ring, made by its first rank and opened by the host's other ranks (collective
    on the queue group); None on a host without trainers (its samplers feed relays)."""
    topo, hosts = strat.ctx.topo, strat.hosts
    mine = hosts.ring_of(topo.rank)
    shape = None if mine is None else dict(
        slots=strat.queue_depth * len(hosts.slots[mine]), slot_bytes=strat.queue_slot_mb * 2**20,
        procs=topo.world_size, timeout_s=ring_timeout())
    ring = JobRing.create(**shape) if mine == topo.rank else None
    handles = torch.zeros(topo.world_size, 2, dtype=torch.int64)
    if ring is not None:
        handles[topo.rank] = torch.tensor(ring.handle)
    dist.all_reduce(handles, group=strat.queue_group)  # each host's first rank sets its row
    if mine is not None and ring is None:
        ring = JobRing.attach(tuple(handles[mine].tolist()), **shape)
    dist.barrier(group=strat.queue_group)  # every rank holds it before its maker may go on
    return ring


class SlotReducer:
    """Each step's gradient as one row per slot, all-reduced over the takers (async, in step
    order) and summed in slot order; :meth:`apply_until` applies them in order. Sparse
    embedding tables' gradients are gathered per step as it is applied, in slot order."""

    def __init__(self, strat: FactoredRun, stats: StepStats, steps: int,
                 progress: Any = None) -> None:
        self.strat, self.stats, self.steps, self.progress = strat, stats, steps, progress
        #: embedding tables with sparse gradients: gathered per step in slot order, not rows
        self.sparse = list(strat._sparse)
        skip = {id(p) for p in self.sparse}
        self.trained = [p for p in strat._module.parameters() if p.requires_grad]
        self.params = [p for p in self.trained if id(p) not in skip]
        self.sizes = [p.numel() for p in self.params]
        dtypes = {p.dtype for p in self.params}
        self.dtype = dtypes.pop() if len(dtypes) == 1 else torch.float64
        self.slots = strat.jobs_per_step  # J rows: one per job of the step
        self.open: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.open_sparse: dict[int, dict[int, tuple[torch.Tensor, torch.Tensor]]] = {}
        self.pending: deque = deque()
        self.posted = self.applied = 0  # steps launched, steps applied

    def _rows(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        if step not in self.open:
            self.open[step] = (torch.zeros(self.slots, sum(self.sizes), dtype=self.dtype),
                               torch.zeros(self.slots, EXTRA, dtype=torch.float64))
        return self.open[step]

    def add(self, step: int, slot: int, loss: float, seconds: float, trainer: bool) -> None:
        """Move the gradients of job ``(step, slot)`` into its row (and clear them)."""
        grads, extra = self._rows(step)
        row, pos = grads[slot], 0
        for p, n in zip(self.params, self.sizes):
            if p.grad is not None:
                row[pos: pos + n].copy_(p.grad.detach().reshape(-1))
            p.grad = None
            pos += n
        if self.sparse:  # the job's looked-up rows, reduced when the step is applied
            self.open_sparse.setdefault(step, {})[slot] = flat_sparse(self.sparse)
            for p in self.sparse:
                p.grad = None
        extra[slot, 0] = loss
        if trainer:  # the trainers' seconds per job (T_t); standby jobs do not count
            extra[slot, 1], extra[slot, 2] = seconds, 1.0

    def post_until(self, step: int) -> None:
        """Launch the reduction of every step before ``step`` not launched yet."""
        while self.posted < min(step, self.steps):
            grads, extra = self._rows(self.posted)
            del self.open[self.posted]
            group = self.strat.reduce_group
            works = [dist.all_reduce(grads, group=group, async_op=True),
                     dist.all_reduce(extra, group=group, async_op=True)]
            self.stats.bytes_reduced += (grads.numel() * grads.element_size()
                                         + extra.numel() * extra.element_size())
            self.pending.append((works, grads, extra))
            self.posted += 1

    def apply_until(self, step: int, wait: bool = True,
                    idle: Callable[[], object] | None = None) -> bool:
        """Apply the updates of steps up to ``step`` (launched ones); with ``wait=False`` only
        those whose reduction is done. True when step ``step`` is applied. ``idle`` runs
        while a reduction is awaited (a sampler answers its relays meanwhile)."""
        last = min(step, self.steps - 1)
        while self.applied <= last:
            if not self.pending:
                return False
            works, grads, extra = self.pending[0]
            if not wait and not all(w.is_completed() for w in works):
                return False
            t0 = time.perf_counter()
            while idle is not None and not all(w.is_completed() for w in works):
                idle()
                time.sleep(1e-4)
            for w in works:
                w.wait()
            self.stats.reduce_wait += time.perf_counter() - t0
            self.pending.popleft()
            self._apply(grads, extra)
        return True

    def _apply(self, grads: torch.Tensor, extra: torch.Tensor) -> None:
        total = grads[0].clone()
        for slot in range(1, self.slots):  # a fixed order: the same bits whoever trained what
            total += grads[slot]
        pos = 0
        for p, n in zip(self.params, self.sizes):
            p.grad = total[pos: pos + n].view_as(p).to(device=p.device, dtype=p.dtype)
            pos += n
        if self.sparse:
            self._gather_sparse(self.open_sparse.pop(self.applied, {}))
        if self.strat.record is not None:
            self.strat.record["grads"].append(grad_copies(self.trained))
        self.strat._optimizer.step()
        for p in self.trained:
            p.grad = None
        self.stats.loss_sum += sum(extra[:, 0].tolist())
        seconds, jobs = float(extra[:, 1].sum()), float(extra[:, 2].sum())
        if jobs > 0:
            self.stats.last_t_train = seconds / jobs
        self.applied += 1
        if self.progress is not None:
            self.progress.update(1)

    def _gather_sparse(self, mine: dict[int, tuple[torch.Tensor, torch.Tensor]]) -> None:
        """The step's sparse gradients: every taker's jobs' rows and values (each row keyed by
        its slot) in one pair of all-gathers on the takers' sparse group (applied in step
        order on every taker, so the collectives match), put in slot order: the same
        gradient whoever trained which job. Blocks until every taker applies the step."""
        total = table_rows(self.sparse)
        ref = self.sparse[0]
        keys = [rows + slot * total for slot, (rows, _) in sorted(mine.items())]
        vals = [v for _, (_, v) in sorted(mine.items())]
        keys_t = torch.cat(keys) if keys else torch.empty(0, dtype=torch.long,
                                                          device=ref.device)
        vals_t = torch.cat(vals) if vals else ref.new_zeros((0, *ref.shape[1:]))
        group = self.strat.sparse_group
        all_keys = gather_rows(keys_t, group)
        all_vals = gather_rows(vals_t, group)
        self.stats.bytes_reduced += keys_t.numel() * keys_t.element_size() + \
            vals_t.numel() * vals_t.element_size()
        order = torch.argsort(torch.div(all_keys, total, rounding_mode="floor"), stable=True)
        set_sparse(self.sparse, all_keys[order] % total, all_vals[order])


@dataclass
class Job:
    """A job taken from the ring, its features gathered."""

    number: int
    step: int
    mb: MiniBatch
    x: torch.Tensor
    y: torch.Tensor
    load_seconds: float
    nbytes: int


class Feeder:
    """A trainer's jobs from the ring in job order, features gathered: up to ``depth`` jobs
    claimed ahead of the one in training, by a thread (``depth=0``: on the caller's thread).

    With ``tail`` > 0 (several jobs per trainer and step), a job among the last ``tail`` of its
    step is claimed only by a trainer that holds no other job: the last jobs of a step go to
    whichever trainer is free first, not to one that claimed them ahead while still busy, so
    a slow trainer does not hold back the step."""

    def __init__(self, strat: FactoredRun, ring: JobRing, base: int, end: int, depth: int,
                 targets: Callable[[int], Any], per_step: int = 1, tail: int = 0) -> None:
        self.strat, self.ring, self.base, self.end = strat, ring, base, end
        self.per_step, self.tail = per_step, tail
        self.targets = targets  # job number -> what the task's loss compares its rows with
        self.lock = threading.Lock()  # a claim and its entry in ``held`` are one step
        self.held: deque[int] = deque()  # jobs claimed here and not yet trained
        self.stop = threading.Event()
        self.thread = None
        if depth > 0:
            self.tokens = threading.Semaphore(depth)
            self.out: queue.Queue = queue.Queue()
            self.thread = threading.Thread(target=self._run, name="gnnscale-factored-feeder",
                                           daemon=True)
            self.thread.start()

    def first_open_job(self) -> int:
        """The lowest job this rank may still train: steps before its step are done here."""
        with self.lock:
            nt = self.ring.next_take
            return min(self.held[0], nt) if self.held else nt

    def done(self, number: int) -> None:
        """Job ``number`` is trained (it is the oldest held)."""
        with self.lock:
            self.held.remove(number)

    def _claim(self):
        with self.lock:
            nt = self.ring.next_take
            if self.held and self.tail > 0 and nt < self.end and \
                    (nt - self.base) % self.per_step >= self.per_step - self.tail:
                return None  # a step's last jobs: only when this trainer is free (poll again)
            got = self.ring.try_take(self.end)
            if got is not None:
                self.held.append(got[0])
        if got is None and self.ring.next_take >= self.end:
            return _DONE
        return got

    def _fetch(self, idle=None):
        ring = self.ring
        got = ring.wait(self._claim, lambda: ring.next_take, f"job {ring.next_take}", idle)
        if got is _DONE:
            return _DONE
        number, (header, body) = got
        t0 = time.perf_counter()
        _, step, mb = unpack(header, body)
        strat = self.strat
        x = strat.gather(mb)
        y = device_seam.to_device(self.targets(number), strat.ctx.topo.device)
        return Job(number, step, mb, x, y, time.perf_counter() - t0,
                   (header.numel() + body.numel()) * 8)

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                if not self.tokens.acquire(timeout=0.05):
                    continue
                job = self._fetch(idle=self._check_stop)
                self.out.put(job)
                if job is _DONE:
                    return
        except _Stopped:
            return
        except BaseException as err:  # noqa: BLE001 - handed to the trainer's thread
            self.out.put(err)

    def _check_stop(self) -> None:
        if self.stop.is_set():
            raise _Stopped

    def next(self, idle: Callable[[], None]) -> Job | None:
        """The next job (None at the end of the epoch); ``idle`` runs while waiting."""
        if self.thread is None:
            job = self._fetch(idle)
            return None if job is _DONE else job
        while True:
            try:
                got = self.out.get(timeout=0.002)
            except queue.Empty:
                idle()
                continue
            if isinstance(got, BaseException):
                raise got
            if got is _DONE:
                return None
            self.tokens.release()  # this one starts training: the thread may claim another
            return got

    def close(self) -> None:
        """Stop the thread (jobs it holds are lost: only on the way out of a failed epoch)."""
        self.stop.set()
        if self.thread is not None:
            self.tokens.release()
            self.thread.join(timeout=5)


class _Stopped(Exception):
    """The feeder thread was told to stop while it waited."""


def job_target(strat: FactoredRun, epoch: int, jobs: HostJobs):
    """Job number -> the task's target of its items (slot ``slot`` of step ``step``)."""

    def target(number: int):
        step, slot = jobs.locate(number, epoch)
        return strat.schedule.target(epoch, step, slot)

    return target


def taker_epoch(strat: FactoredRun, ring: JobRing, epoch: int, steps: int, stats: StepStats,
                progress: Any = None) -> None:
    """A trainer: take jobs until every job of the host's ring (``steps`` steps) is taken;
    every step's reduction. The host's first rank relays jobs from remote samplers
    meanwhile."""
    k, me = strat.staleness, strat.ctx.topo.rank
    jobs = strat.ring_jobs(steps)
    base, end = jobs.base(epoch), jobs.end(epoch)
    ring.start(base)
    relay = _relay(strat, ring, jobs, epoch)
    reducer = SlotReducer(strat, stats, steps, progress)
    trainers = jobs.per_step // strat.jobs_per_trainer  # the trainers of this ring
    tail = trainers - 1 if strat.jobs_per_trainer > 1 else 0
    feeder = Feeder(strat, ring, base, end, strat.prefetch,
                    job_target(strat, epoch, jobs), jobs.per_step, tail)

    def idle() -> None:
        if relay is not None:
            relay.check()
        reducer.post_until(jobs.step_of(feeder.first_open_job(), epoch))

    try:
        while True:
            t0 = time.perf_counter()
            job = feeder.next(idle)
            stats.queue_wait += time.perf_counter() - t0
            if job is None:
                break
            step, slot = jobs.locate(job.number, epoch)
            if job.step != step:
                raise RuntimeError(f"factored queue: job {job.number} holds step {job.step}, "
                                   f"expected step {step}")
            stats.load_seconds += job.load_seconds
            strat._received_bytes += job.nbytes
            reducer.post_until(step)
            reducer.apply_until(step - 1 - k)
            strat.visited(job.mb.input_nodes)
            before = stats.train_seconds
            loss = train_job(strat, job.mb, job.x, job.y, stats, (epoch, step, slot))
            seconds = stats.train_seconds - before
            ring.add_stats(me, 1.0, seconds)
            reducer.add(step, slot, loss, seconds, trainer=True)
            feeder.done(job.number)
        reducer.post_until(steps)
        reducer.apply_until(steps - 1)
        if relay is not None:
            relay.join()
    finally:
        feeder.close()


def _relay(strat: FactoredRun, ring: JobRing, jobs: HostJobs, epoch: int) -> Relay | None:
    """This epoch's relay, started, on a ring host's first rank whose ring remote samplers
    feed; None elsewhere."""
    me = strat.ctx.topo.rank
    feeders = strat.hosts.remote.get(me, ())
    if not feeders:
        return None
    return Relay(ring, jobs, feeders, strat.relay_groups, strat.queue_depth,
                 strat.ctx.sampler.num_layers, me, epoch).start()


@dataclass
class Produced:
    """A sampler's epoch through the ring: bytes put, the most jobs seen waiting in it."""

    bytes: int = 0
    peak_in_flight: int = 0


def sampler_epoch(strat: FactoredRun, ring: JobRing | None, epoch: int, steps: int, stats: StepStats
                  ) -> Produced:
    """A sampler: sample the next unclaimed job of its host's ring (of ``steps`` steps) and put
    it there, answering the relays that ask it meanwhile; with switching, train jobs as a
    standby trainer while GNNLab's profit metric is positive. On a host without a ring it only
    answers relays."""
    me, k = strat.ctx.topo.rank, strat.staleness
    out = Produced()
    make = make_job(strat, stats)
    asks = Requests(strat, strat.hosts.relays_fed_by(me), strat.relay_groups, make)
    if ring is None:
        asks.finish(ring_timeout())
        out.bytes = asks.bytes
        return out
    jobs = strat.ring_jobs(steps)
    base, end = jobs.base(epoch), jobs.end(epoch)
    ring.start(base)
    standby = strat.switching
    reducer = SlotReducer(strat, stats, steps) if standby else None

    def open_step() -> int:
        return jobs.step_of(min(ring.next_take, end), epoch)

    def idle() -> None:
        asks.serve()
        if standby:
            reducer.post_until(open_step())
            _maybe_train(strat, ring, reducer, stats, epoch, jobs, k, asks.serve)

    while (number := ring.claim_make(end)) is not None:
        step, slot = jobs.locate(number, epoch)
        parts = make(epoch, step, slot)
        ring.wait(lambda g=number, p=parts: True if ring.try_put(g, p, me) else None,
                  lambda: ring.next_take, f"a free ring slot for job {number}", idle)
        out.bytes += (parts[0].numel() + parts[1].numel()) * 8
        out.peak_in_flight = max(out.peak_in_flight, ring.ready())
        asks.serve()
        if standby:
            reducer.post_until(open_step())
    if standby:  # the epoch's last jobs: help while it pays, join every step's reduction
        ring.wait(lambda: True if ring.next_take >= end else None, lambda: ring.next_take,
                  "the epoch's last jobs to be taken", idle)
        reducer.post_until(steps)
        reducer.apply_until(steps - 1, idle=asks.serve)
    asks.finish(ring_timeout())
    out.bytes += asks.bytes
    return out


def ring_timeout() -> float:
    """The run's deadline in seconds (``dist.timeout_s``; 300 s outside a run)."""
    timeout = run_timeout()
    return timeout.total_seconds() if timeout is not None else 300.0


def _trainers_t_train(strat: FactoredRun, ring: JobRing) -> float:
    """The mean seconds per job so far of the trainers of this ring (the profile's figure
    before any)."""
    rows = ring.stats()[: strat.alloc.trainers]
    jobs = float(rows[:, 0].sum())
    return float(rows[:, 1].sum()) / jobs if jobs > 0 else strat.alloc.t_train


def _maybe_train(strat: FactoredRun, ring: JobRing, reducer: SlotReducer, stats: StepStats,
                 epoch: int, jobs: HostJobs, k: int, serve: Callable[[], bool]) -> None:
    """A standby trainer's decision (GNNLab section 5.3) and, when it pays, one job trained;
    ``serve`` answers its relays while it waits for a step's update."""
    t_train = _trainers_t_train(strat, ring)
    if t_train <= 0:  # nothing measured yet: no basis for the profit metric
        return
    own = stats.own_t_train or t_train
    head, end = ring.next_take, jobs.end(epoch)
    trainers = jobs.per_step // strat.jobs_per_trainer  # N_t: this ring's trainers
    if head >= end or _profit(end - head, trainers, t_train, own) <= 0 or \
            not ring.head_ready():
        return
    step = jobs.step_of(head, epoch)
    reducer.post_until(step)
    if not reducer.apply_until(step - 1 - k, wait=False):
        return  # its parameters are not there yet: sample on
    got = ring.try_take(end)
    if got is None:
        return
    number, (header, body) = got
    step, slot = jobs.locate(number, epoch)
    reducer.post_until(step)  # every job before this one is taken: safe to wait, serving
    reducer.apply_until(step - 1 - k, idle=serve)  # the relays (their jobs may be owed)
    _, _, mb = unpack(header, body)
    strat.visited(mb.input_nodes)  # sent to rank 0 at the epoch's end (footprint)
    dev = strat.ctx.topo.device
    t0 = time.perf_counter()
    x = strat.host_gather(mb).to(dev)  # a standby trainer has no cache
    y = device_seam.to_device(strat.schedule.target(epoch, step, slot), dev)
    stats.load_seconds += time.perf_counter() - t0
    before = stats.train_seconds
    loss = train_job(strat, mb, x, y, stats, (epoch, step, slot))
    stats.own_t_train = stats.train_seconds - before
    ring.add_stats(strat.ctx.topo.rank, 1.0, stats.own_t_train)
    reducer.add(step, slot, loss, stats.own_t_train, trainer=False)
    stats.switch_events += 1
