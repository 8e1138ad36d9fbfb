"""Sampler worker processes: whole mini-batches sampled into shared memory, ahead of training.

A :class:`SamplerPool` starts ``workers`` processes (``spawn`` context) once; each opens the
graph itself and samples the jobs given to it. A job is ``(targets, sample seed)`` from the
shared schedule (:mod:`gnnscale.sampling.schedule`), so a pool draws exactly what the inline
sampler draws. Job ``i`` of a :meth:`SamplerPool.map` goes to worker ``i % workers``; a result
comes back through a torch multiprocessing queue as the mini-batch codec's header (a list of
ints) and body (:mod:`gnnscale.sampling.codec`), the body written straight into one
shared-memory tensor that the consumer maps (one segment per mini-batch, nothing copied), and
results are yielded in job order (a reorder buffer), at most ``depth`` jobs ahead of the
consumer. The pool's own thread reads the queue and maps each body (a handshake with the
worker for the segment's file descriptor); the consumer only waits on that thread, with
deadlines, so a Ctrl-C or a stopped worker never leaves it blocked inside a handshake.

How a worker gets the graph:

- loaded by :func:`gnnscale.data.processed.load` (``graph.meta["processed_dir"]`` is set): the
  worker memory-maps the same files (shared page cache, nothing copied); the checksum must match;
- built in memory: the arrays sampling reads (``indptr``, ``indices``, ``edge_weight``, and
  ``type_per_edge`` on a graph with edge types) are moved into shared memory once, when the
  pool starts (``share_memory_()``), and the workers map them. Other arrays (features,
  labels) never reach the workers.

Errors in a worker are raised in the consumer as :class:`SamplerWorkerError` carrying the
worker's traceback (a result the worker could not send, too); a worker that dies is reported
within ``poll_s`` seconds, and one that sends nothing for a job within ``timeout_s`` (the
run's deadline, ``dist.timeout_s``) is named with its state (stopped, running) instead of
being waited for. A worker's start-up (its process started, the graph opened) runs under
``startup_timeout_s`` instead (the run's start-up deadline, ``dist.startup_timeout_s``): the
run's deadline arms for a worker once it is ready, so a slow start on a busy host does not
spend it. Breaking out of a :meth:`~SamplerPool.map` cancels its remaining jobs (the
pool stays usable); :meth:`close` (or leaving a ``with`` block) stops the workers. A worker
dies with the thread that started the pool (``PR_SET_PDEATHSIG``: SIGKILL, which ends even a
stopped one) and, where that is missing, exits once its parent is gone, within ``poll_s``
seconds: a killed rank leaves no orphans. Its sockets go to
:func:`~gnnscale.distributed.guard.socket_dir` (a path short enough for AF_UNIX).
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
import traceback
import weakref
from collections.abc import Iterator, Sequence
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch
import torch.multiprocessing as mp

from gnnscale.data import processed
from gnnscale.data.graph import GraphStore
from gnnscale.distributed.guard import (
    process_state,
    set_parent_death_signal,
    sigint_blocked,
    socket_dir,
)
from gnnscale.distributed.launch import describe_exit, stop_processes
from gnnscale.distributed.threads import unbind
from gnnscale.distributed.topology import run_timeout, startup_timeout
from gnnscale.sampling import codec
from gnnscale.sampling.base import MiniBatch, Sampler

Job = tuple[torch.Tensor, int]  # (target vertex ids, sample seed)
_IDLE = -1  # generation value while no map is running: workers skip every queued job
_READY = -2  # the index of a worker's "graph open, ready to sample" message
DEFAULT_TIMEOUT_S = 300.0  # a pool's deadline outside a run (a run's is dist.timeout_s)
#: a pool's start-up deadline outside a run (a run's is dist.startup_timeout_s)
DEFAULT_STARTUP_TIMEOUT_S = 600.0


class SamplerWorkerError(RuntimeError):
    """A sampler worker raised (the message carries its traceback) or died."""


def _graph_source(graph: GraphStore) -> tuple[str, Any]:
    """What a worker needs to open ``graph``: its processed folder, or shared-memory arrays."""
    folder = graph.meta.get("processed_dir")
    if folder and processed.is_processed(folder):
        return "dir", (str(folder), graph.meta.get("checksum"))
    arrays = {}
    names: tuple[str, ...] = ("indptr", "indices", "edge_weight")
    types = {}
    if graph.is_typed:  # a typed graph: blocks carry types, the store checks them
        names += ("type_per_edge", "node_type_offset")
        types = {"node_types": tuple(graph.node_types), "edge_types": tuple(graph.edge_types)}
    for name in names:
        t = getattr(graph, name)
        if t is not None and not t.is_shared():
            t = t.share_memory_() if t.is_contiguous() else t.contiguous().share_memory_()
            setattr(graph, name, t)
        arrays[name] = t
    return "shm", ({**arrays, **types}, graph.num_classes, graph.name)


def _open_graph(kind: str, spec: Any) -> GraphStore:
    if kind == "dir":
        folder, digest = spec
        graph = processed.load(folder, mmap=True)
        if digest and graph.meta.get("checksum") != digest:
            raise SamplerWorkerError(f"the processed graph at {folder} changed since the training "
                                     "process loaded it: restart the run")
        return graph
    arrays, num_classes, name = spec
    return GraphStore(num_classes=num_classes, name=name, **arrays)


def _worker_main(wid: int, sampler: Sampler, kind: str, spec: Any, jobs: Any, results: Any,
                 current: Any, parent: int, poll_s: float, threads: int) -> None:
    """Worker loop: sample jobs of the current generation until told to stop or orphaned."""
    set_parent_death_signal(signal.SIGKILL)  # even when stopped: nothing here to unwind
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the rank closes the pool
    if os.getppid() != parent:
        return  # the parent died before the death signal was set
    unbind()  # a bound rank's block is its own: a worker samples on any of the run's cores
    torch.set_num_threads(threads)
    results.cancel_join_thread()  # never block exit on results nobody will read

    def unsent(err: Exception, msg: Any) -> None:  # the queue's feeder thread failed to send
        gen, index = (msg[0], msg[1]) if isinstance(msg, tuple) and len(msg) == 5 else (None, -1)
        results.put((gen, index, wid, False, "could not send its result to the training "
                     f"process: {type(err).__name__}: {err}"))

    results._on_queue_feeder_error = unsent  # instead of a traceback printed and a lost job
    try:
        graph = _open_graph(kind, spec)
    except BaseException:  # noqa: BLE001 - handed to the consumer
        results.put((None, -1, wid, False, traceback.format_exc()))
        return
    results.put((None, _READY, wid, True, None))  # its deadlines count from here
    while os.getppid() == parent:
        try:
            msg = jobs.get(timeout=poll_s)
        except queue.Empty:
            continue
        if msg is None:
            return
        gen, index, targets, seed = msg
        if gen != current.value:
            continue  # a cancelled map's job
        try:
            t0 = time.perf_counter()
            mb = sampler.sample(graph, targets, seed)
            seconds = time.perf_counter() - t0
            header, body = codec.encode(mb, shared=True)
            results.put((gen, index, wid, True, ((header.tolist(), body), seconds)))
        except BaseException:  # noqa: BLE001 - handed to the consumer
            results.put((gen, index, wid, False, traceback.format_exc()))


class _Unreceived:
    """What the receiver hands the consumer when a result could not be read or rebuilt."""

    def __init__(self, why: str) -> None:
        self.why = why


def _receive(results: Any, inbox: queue.Queue, stop: threading.Event, poll_s: float,
             receiving: list) -> None:
    """The pool's receiving thread: every result message read and rebuilt (a shared body's
    file descriptor fetched from its worker) here, then handed to the consumer through
    ``inbox``. The consumer waits on ``inbox`` with deadlines, so a handshake that never ends
    (its worker stopped mid-send) leaves it free to report the worker or to take a Ctrl-C."""
    reader = results._reader  # only this thread reads: the queue's read lock is not needed
    while not stop.is_set():
        try:
            if not reader.poll(poll_s):
                continue
            data = reader.recv_bytes()
        except (EOFError, OSError, ValueError) as err:  # the pipe is gone: the pool is closing
            if not stop.is_set():
                inbox.put(_Unreceived(f"the results pipe failed: {type(err).__name__}: {err}"))
            return
        receiving[0] = time.monotonic()  # since when a body is being mapped (for _overdue)
        try:
            inbox.put(ForkingPickler.loads(data))
        except BaseException as err:  # noqa: BLE001 - handed to the consumer
            if stop.is_set():
                return
            inbox.put(_Unreceived(f"{type(err).__name__}: {err}"))
        finally:
            receiving[0] = None


def _shutdown(procs: list, job_queues: list, grace_s: float, ready: dict,
              stop: threading.Event) -> None:
    """Ask every worker to stop, then terminate (and kill) the ones still running; one that
    has not said it is ready (still importing) is terminated at once: it reads no queue."""
    stop.set()  # the receiver ends within its poll (or when a worker's socket closes)
    for q in job_queues:
        try:
            q.put(None)
        except (OSError, ValueError):
            pass
    started = [(w, p) for w, p in enumerate(procs) if p.pid is not None]
    stop_processes([p for w, p in started if w not in ready], 0.0)
    stop_processes([p for w, p in started if w in ready], grace_s)
    for q in job_queues:
        q.cancel_join_thread()
        q.close()


class SamplerPool:
    """``workers`` sampler processes for ``graph``; :meth:`map` yields ``(MiniBatch, seconds)``.

    ``depth`` bounds the jobs handed out but not yet consumed (in flight or ready); ``seconds``
    is the time the worker spent sampling that mini-batch. One :meth:`map` at a time.
    """

    def __init__(self, sampler: Sampler, graph: GraphStore, workers: int, depth: int = 2,
                 threads_per_worker: int = 1, poll_s: float = 0.5, grace_s: float = 5.0,
                 timeout_s: float | None = None,
                 startup_timeout_s: float | None = None) -> None:
        if workers < 1:
            raise ValueError(f"a SamplerPool needs workers >= 1, got {workers} (use the thread "
                             "Prefetcher for 0)")
        if depth < 1:
            raise ValueError(f"SamplerPool depth must be >= 1, got {depth}")
        if timeout_s is None:  # the run's deadline, as every collective of the rank has
            run = run_timeout()
            timeout_s = run.total_seconds() if run is not None else DEFAULT_TIMEOUT_S
        if startup_timeout_s is None:  # the run's start-up deadline, as the rank's own
            startup = startup_timeout()
            startup_timeout_s = startup.total_seconds() if startup is not None \
                else max(DEFAULT_STARTUP_TIMEOUT_S, float(timeout_s))
        for key, value in (("timeout_s", timeout_s), ("startup_timeout_s", startup_timeout_s)):
            if not value > 0:
                raise ValueError(f"SamplerPool {key} must be > 0, got {value}")
        self.startup_timeout_s = float(startup_timeout_s)
        socket_dir()  # where the workers' sockets go (inherited): short enough for AF_UNIX
        ctx = mp.get_context("spawn")
        self.workers, self.depth, self.poll_s = workers, depth, poll_s
        self.timeout_s = float(timeout_s)
        kind, spec = _graph_source(graph)
        self.source = kind
        self._current = ctx.Value("q", _IDLE, lock=False)
        self._gen = 0
        self._busy = False
        self._results = ctx.Queue()
        self._jobs = [ctx.Queue() for _ in range(workers)]
        self._procs = [
            ctx.Process(target=_worker_main, name=f"gnnscale-sampler-{w}", daemon=True,
                        args=(w, sampler, kind, spec, self._jobs[w], self._results,
                              self._current, os.getpid(), poll_s, threads_per_worker))
            for w in range(workers)
        ]
        self._ready: dict[int, float] = {}  # worker -> when it said it was ready
        self._inbox: queue.Queue = queue.Queue()
        self._receiving: list[float | None] = [None]
        stop = threading.Event()
        self._finalizer = weakref.finalize(self, _shutdown, self._procs, self._jobs, grace_s,
                                           self._ready, stop)
        with sigint_blocked():  # Ctrl-C is the rank's to act on, not a traceback mid-import
            for p in self._procs:
                p.start()
            threading.Thread(target=_receive, args=(self._results, self._inbox, stop, poll_s,
                                                     self._receiving),
                             name="gnnscale-sampler-results", daemon=True).start()
        self._started = time.monotonic()

    @property
    def pids(self) -> list[int | None]:
        """Process ids of the workers (None before one starts)."""
        return [p.pid for p in self._procs]

    @property
    def closed(self) -> bool:
        """True once the workers are stopped (:meth:`close`)."""
        return not self._finalizer.alive

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        self._current.value = _IDLE
        self._finalizer()

    def __enter__(self) -> SamplerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _deadline(self, job: int, since: float) -> float:
        """When waiting for ``job`` (since ``since``) ends: ``timeout_s`` after the later of
        ``since`` and its worker's start-up; while the worker starts, ``startup_timeout_s``
        after the pool's start."""
        ready = self._ready.get(job % self.workers)
        if ready is None:
            return self._started + self.startup_timeout_s
        return max(since, ready) + self.timeout_s

    def _next_result(self, job: int, since: float) -> tuple:
        """The next result message while waiting for ``job`` (since ``since``); raises when a
        worker died, the pool was closed, or the job's deadline passed without its result."""
        while True:
            if self.closed:
                raise SamplerWorkerError("the SamplerPool was closed")
            deadline = self._deadline(job, since)
            try:
                msg = self._inbox.get(timeout=max(0.0, min(self.poll_s,
                                                           deadline - time.monotonic())))
                if isinstance(msg, _Unreceived):
                    raise SamplerWorkerError("could not receive a result from the sampler "
                                             f"workers: {msg.why}")
                if msg[0] is None and msg[1] == _READY:
                    self._ready[msg[2]] = time.monotonic()
                    continue
                return msg
            except queue.Empty:
                for w, p in enumerate(self._procs):
                    if not p.is_alive():
                        raise SamplerWorkerError(
                            f"sampler worker {w} (pid {p.pid}) died ({describe_exit(p.exitcode)})"
                        ) from None
                if time.monotonic() >= deadline:
                    raise SamplerWorkerError(self._overdue(job)) from None

    def _overdue(self, job: int) -> str:
        """Why ``job`` has no result: the worker it went to, named, with its state."""
        w = job % self.workers
        pid = self._procs[w].pid
        state = process_state(pid)
        what = ("is stopped (state T: SIGSTOP, SIGTSTP or a debugger)" if state in ("T", "t")
                else f"still runs (state {state})")
        late = (f"sent no result for job {job} within {self.timeout_s:g} s, the run's "
                "deadline (dist.timeout_s)" if w in self._ready
                else "did not finish starting (opening the graph) within "
                f"{self.startup_timeout_s:g} s, the start-up deadline (dist.startup_timeout_s)")
        since = self._receiving[0]
        stuck = ("" if since is None else "; a result has been stuck for "
                 f"{time.monotonic() - since:.0f} s in the handshake that maps its shared memory")
        return f"sampler worker {w} (pid {pid}) {late}: its process {what}{stuck}"

    def map(self, jobs: Sequence[Job]) -> Iterator[tuple[MiniBatch, float]]:
        """Sample ``jobs`` on the workers; yields ``(MiniBatch, seconds)`` in job order."""
        if self.closed:
            raise SamplerWorkerError("the SamplerPool was closed")
        return self._ordered(list(jobs))

    def _ordered(self, jobs: list[Job]) -> Iterator[tuple[MiniBatch, float]]:
        if self._busy:
            raise RuntimeError("SamplerPool.map is already running: finish or close it first")
        self._gen += 1
        gen = self._gen
        self._current.value = gen
        self._busy = True
        ready: dict[int, tuple[tuple[list[int], torch.Tensor], float]] = {}
        sent = 0
        try:
            for i in range(len(jobs)):
                while sent < min(len(jobs), i + self.depth):
                    targets, seed = jobs[sent]
                    self._jobs[sent % self.workers].put((gen, sent, targets, int(seed)))
                    sent += 1
                since = time.monotonic()
                while i not in ready:
                    g, index, wid, ok, payload = self._next_result(i, since)
                    if not ok and g in (None, gen):
                        what = "opening the graph" if g is None else f"job {index}"
                        raise SamplerWorkerError(
                            f"sampler worker {wid} failed on {what}:\n{payload}")
                    if g == gen:
                        ready[index] = payload
                (header, body), seconds = ready.pop(i)
                yield codec.decode(header, body), seconds
        finally:
            self._current.value = _IDLE  # workers drop the rest of this map's jobs
            self._busy = False
