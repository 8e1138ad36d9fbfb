"""A ring fed over the network: the relay of a ring host and the samplers it asks.

The relay is a thread of the ring host's first rank (a trainer). It claims the ring's next
jobs itself (:meth:`~gnnscale.distributed.ring.JobRing.claim_make`, beside the host's own
samplers), keeps up to ``depth`` of them requested from each remote sampler, receives each
sampled job back and puts it into the ring, lowest job first, so that a job a trainer waits
for is never stuck behind a later one. A request is four int64s ``job, epoch, step, slot``
(``job = -1``: the epoch's requests are over); the answer is the job's header and body as the
fixed routes send them (:mod:`~gnnscale.strategies.factored.queue`). A job's sample seed
depends on its step and slot only, so which sampler makes it changes nothing.

A sampler serves the relays that ask it between its own jobs and whenever it waits
(:meth:`Requests.serve`), and ends its epoch when each relay has said the requests are over.
Requests travel on one process group and jobs on another, each used by one thread of a
process: a gloo point-to-point receive completes only when waited for, so a thread per relay
waits for its requests. Both sides wait under the run's deadline (``dist.timeout_s``): a peer
that stops answering ends the run instead of hanging it.
"""

from __future__ import annotations

import heapq
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from gnnscale.distributed.ring import JobRing
from gnnscale.strategies.factored.hosts import HostJobs
from gnnscale.strategies.factored.protocol import FactoredRun
from gnnscale.strategies.factored.queue import JobSender, pack, receive_parts

if TYPE_CHECKING:
    from gnnscale.strategies.factored.sync import StepStats

REQUEST = 4
STOP = -1


class Relay:
    """The ring host's side for one epoch, in a thread: :meth:`start`, then :meth:`join`.
    ``groups``: the requests' process group and the jobs'."""

    def __init__(self, ring: JobRing, jobs: HostJobs, feeders: tuple[int, ...],
                 groups: tuple[dist.ProcessGroup, dist.ProcessGroup],
                 depth: int, num_layers: int, rank: int, epoch: int) -> None:
        self.ring, self.jobs, self.feeders = ring, jobs, feeders
        self.ask_group, self.job_group = groups
        self.depth, self.num_layers, self.rank, self.epoch = depth, num_layers, rank, epoch
        self.error: BaseException | None = None
        self.bytes = 0
        self.thread = threading.Thread(target=self._run, name="gnnscale-factored-relay",
                                       daemon=True)

    def start(self) -> Relay:
        """Start relaying this epoch's jobs."""
        self.thread.start()
        return self

    def check(self) -> None:
        """Raise the relay's error, if it failed."""
        if self.error is not None:
            raise RuntimeError(f"factored relay of rank {self.rank} failed: {self.error}") \
                from self.error

    def join(self) -> None:
        """Wait for the relay's epoch to end; raise its error."""
        self.thread.join()
        self.check()

    def _run(self) -> None:
        try:
            self._relay()
        except BaseException as err:  # noqa: BLE001 - raised on the trainer's thread
            self.error = err

    def _relay(self) -> None:
        ring, jobs, epoch = self.ring, self.jobs, self.epoch
        end = jobs.end(epoch)
        ring.start(jobs.base(epoch))
        asked: dict[int, deque[int]] = {f: deque() for f in self.feeders}
        order: list[tuple[int, int]] = []  # (job, feeder), lowest job first
        sends: list = []  # request tensors live until their send completes

        def ask(feeder: int, message: list[int]) -> None:
            req = torch.tensor(message, dtype=torch.int64)
            sends.append((dist.isend(req, feeder, group=self.ask_group), req))

        def top_up() -> None:
            for f in self.feeders:
                while len(asked[f]) < self.depth:
                    number = ring.claim_make(end)
                    if number is None:
                        return
                    step, slot = jobs.locate(number, epoch)
                    ask(f, [number, epoch, step, slot])
                    asked[f].append(number)
                    heapq.heappush(order, (number, f))

        top_up()
        while order:
            number, f = heapq.heappop(order)
            if asked[f].popleft() != number:
                raise RuntimeError(f"factored relay: sampler {f} answered out of order")
            header, body = receive_parts(f, self.num_layers, self.job_group)
            if body is None or (int(header[0]), int(header[1])) != \
                    (epoch, jobs.locate(number, epoch)[0]):
                raise RuntimeError(f"factored relay: job {number} came back as epoch "
                                   f"{int(header[0])}, step {int(header[1])}")
            self.bytes += (header.numel() + body.numel()) * 8
            parts = (header, body)
            ring.wait(lambda n=number, p=parts: True if ring.try_put(n, p, self.rank) else None,
                      lambda: ring.next_take, f"a free ring slot for job {number}")
            top_up()
        for f in self.feeders:
            ask(f, [STOP, epoch, 0, 0])
        for work, _ in sends:
            work.wait()


class Requests:
    """A sampler's side for one epoch: the relays that ask it for jobs, served as they ask
    (a thread per relay receives its requests). ``groups``: the requests' and the jobs'."""

    def __init__(self, strat: FactoredRun, relays: tuple[int, ...], groups: tuple[Any, Any],
                 make: Callable) -> None:
        self.ask_group, self.job_group = groups
        self.make = make  # (epoch, step, slot) -> (header, body)
        self.sender = JobSender(self.job_group, strat.queue_depth) if relays else None
        self.open = set(relays)
        self.inbox: queue.Queue = queue.Queue()
        for r in relays:
            threading.Thread(target=self._listen, args=(r,), daemon=True,
                             name=f"gnnscale-factored-requests-{r}").start()

    def _listen(self, relay: int) -> None:
        try:
            while True:
                buf = torch.empty(REQUEST, dtype=torch.int64)
                dist.recv(buf, relay, group=self.ask_group)
                self.inbox.put((relay, buf.tolist()))
                if int(buf[0]) == STOP:
                    return
        except BaseException as err:  # noqa: BLE001 - raised on the sampler's thread
            self.inbox.put((relay, err))

    @property
    def done(self) -> bool:
        """Every relay has said this epoch's requests are over."""
        return not self.open

    @property
    def bytes(self) -> int:
        """Bytes of jobs sent to relays this epoch."""
        return self.sender.bytes if self.sender is not None else 0

    def serve(self, timeout_s: float = 0.0) -> bool:
        """Answer the requests that have arrived (waiting up to ``timeout_s`` for one); True
        when there was one."""
        served = False
        while self.open:
            try:
                relay, msg = self.inbox.get(timeout=timeout_s) if timeout_s and not served \
                    else self.inbox.get_nowait()
            except queue.Empty:
                break
            if isinstance(msg, BaseException):
                raise RuntimeError(f"factored: requests from relay {relay} failed: {msg}") \
                    from msg
            number, epoch, step, slot = msg
            if number == STOP:
                self.open.discard(relay)
                continue
            header, body = self.make(epoch, step, slot)
            self.sender.send(relay, header, body)
            served = True
        return served

    def finish(self, timeout_s: float) -> None:
        """Serve until every relay is done, then wait for the jobs in flight; a relay silent
        for ``timeout_s`` ends the run."""
        since = time.monotonic()
        while not self.done:
            if self.serve(timeout_s=0.05):
                since = time.monotonic()
            elif time.monotonic() - since > timeout_s:
                raise TimeoutError(f"factored: no request from relays {sorted(self.open)} "
                                   f"for {timeout_s:g} s (dist.timeout_s)")
        if self.sender is not None:
            self.sender.drain()


def make_job(strat: FactoredRun, stats: StepStats) -> Callable:
    """``(epoch, step, slot) -> (header, body)``: sample job ``(step, slot)`` as every sampler
    does (the schedule's draw: its seed fixed by the step and slot), counted in ``stats`` and
    the job log."""

    def make(epoch: int, step: int, slot: int):
        t0 = time.perf_counter()
        mb = strat.sample(strat.schedule.draw(epoch, step, slot))
        parts = pack(mb, epoch, step)
        stats.sample_seconds += time.perf_counter() - t0
        strat.job_log.append((epoch, step, slot))
        return parts

    return make
