"""Factored sampling and training (GNNLab / FGNN): sampler ranks feed trainer ranks.

Ranks ``0 .. T-1`` train, ranks ``T .. N-1`` sample (``strategy.samplers``: a count, or
``auto``: GNNLab's rule on times profiled on the first micro-batches, see
:mod:`~gnnscale.strategies.factored.allocation`). The trainers draw exactly ``strategy=data``'s
mini-batches with T ranks: step ``s`` of epoch ``e`` gives trainer ``t`` the draw
``schedule.draw(e, s, t)`` of the run's schedule with T slots per step (its items, the task's
seeds of them, the sample seed of ``(e, s, t)``). A static scheduler hands job
``j = s * T + t`` to sampler ``j mod S`` (each job exactly once, each sampler in job order);
samplers send jobs through the bounded global queue
(:mod:`~gnnscale.strategies.factored.queue`) and trainers train exactly as ``DataParallel`` does,
with gradients averaged over the trainers' process group, so with no staleness a step equals
``strategy=data`` on the same samples. One rank samples the whole epoch, then trains.

``strategy.queue`` picks how jobs travel. ``shared`` (the default): a ring in shared memory
per host that samplers fill and any trainer of the host takes the next job from (fed over the
network where a host has no sampler: :mod:`~gnnscale.strategies.factored.hosts`), with every
step's gradient reduced per job so that it does not depend on who trained what; a step may
be cut into several jobs per trainer (``strategy.jobs_per_trainer``, GNNLab's micro-batching)
so that a faster trainer takes more of it even at ``staleness=0``; trainers gather the next
job's features while they train (``strategy.prefetch``) and samplers switch to training at
any point of the epoch (:mod:`~gnnscale.strategies.factored.shared`).

``routes``: each job goes point to point from its sampler to the trainer of its slot
(:mod:`~gnnscale.strategies.factored.queue`). With
routes and ``strategy.switching=true`` (GNNLab's behaviour; off by default) or
``strategy.staleness > 0`` every rank joins each step's gradient reduction and a finished
sampler may train jobs as a standby trainer: see :mod:`~gnnscale.strategies.factored.sync`.

From a partitioned layout (``parts=``) every rank holds the whole topology and its own part's
feature rows; each rank runs a row server (:mod:`gnnscale.cache.served`) that answers requests
for its rows whatever it is doing, so a trainer's feature store fetches the rows it neither
caches nor owns from their owners at its own pace (``bytes_remote_owner``), sampler ranks
included, and so do a standby trainer and the trainers' evaluation. A rank's close waits until
every other rank is done asking it.

On a typed graph the trainers gather typed inputs through the same feature store as ``data``
and the typed blocks (``edge_type``, ``e_id``) travel through the queue in the mini-batch
codec. A typed model's sparse embedding tables (featureless node types) are reduced over the
trainers as ``data`` reduces them (:mod:`gnnscale.distributed.sparse`): on fixed routes by
``data``'s step, on the shared queue per job in slot order as each step is applied. Dynamic
switching, and staleness on fixed routes, are refused with such tables
(:func:`~gnnscale.strategies.factored.config.check_sparse_tables`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist

from gnnscale.cache.served import ServedExchange, served_groups
from gnnscale.distributed import ring as job_ring
from gnnscale.distributed.collectives import new_group
from gnnscale.distributed.device import Purpose
from gnnscale.errors import ConfigError
from gnnscale.optim.base import sparse_parameters
from gnnscale.sampling.schedule import Draw
from gnnscale.strategies.base import RunContext
from gnnscale.strategies.data.strategy import DataParallel
from gnnscale.strategies.factored import shared
from gnnscale.strategies.factored.allocation import Allocation, allocate, profile
from gnnscale.strategies.factored.config import (
    FactoredConfig,
    auto_jobs_per_trainer,
    check_sparse_tables,
    parse_jobs_per_trainer,
    parse_samplers,
)
from gnnscale.strategies.factored.config import check_queue as _check_queue
from gnnscale.strategies.factored.config import check_sync as _check_sync
from gnnscale.strategies.factored.hosts import HostJobs, HostPlan
from gnnscale.strategies.factored.presample import presample_hotness
from gnnscale.strategies.factored.queue import STATS_TAG, JobSender, pack, receive
from gnnscale.strategies.factored.sync import (
    StepReducer,
    StepStats,
    sampler_epoch,
    sync_replicas,
    trainer_epoch,
)

FOOTPRINT_TAG = 2  # standby trainers' input-node visits (footprint=true, synced loop)
_SAMPLER_STATS = ("samples_produced", "queue_bytes", "sampler_busy_time", "sampler_idle_time",
                  "switch_events", "standby_train_time", "standby_jobs")


class Factored(DataParallel):
    """Sampler ranks and trainer ranks joined by a queue (GNNLab); trainers train as ``data``."""

    schema = FactoredConfig

    def __init__(self, ctx: RunContext, batch_size: int = 1024, samplers: str = "auto",
                 queue_depth: int = 2, staleness: int = 0, switching: bool = False,
                 queue: str = "shared", prefetch: int = 1, queue_slot_mb: int = 256,
                 jobs_per_trainer: str | int = "auto") -> None:
        super().__init__(ctx, batch_size, prefetch=0)
        if queue_depth < 1:
            raise ConfigError(f"strategy.queue_depth must be >= 1, got {queue_depth}")
        _check_sync(staleness, switching, ctx.topo.world_size)
        _check_queue(queue, prefetch, queue_slot_mb)
        self.queue, self.prefetch, self.queue_slot_mb = queue, prefetch, queue_slot_mb
        self.jobs_per_trainer = parse_jobs_per_trainer(jobs_per_trainer, queue)
        self.shared = False  # decided in setup: the rings need shared memory (Linux)
        self.ring: job_ring.JobRing | None = None
        self.fixed_samplers = parse_samplers(samplers, ctx.topo.world_size)
        self.queue_depth = queue_depth
        self.staleness, self.switching = staleness, switching
        # every rank joins each step's reduction (switching or staleness; one rank: no need)
        self.synced = ctx.topo.world_size > 1 and (switching or staleness > 0)
        self.job_log: list[tuple[int, int, int]] = []  # (epoch, step, trainer) handled here
        self.trained_log: list[tuple[int, int, int]] = []  # jobs this rank trained (synced)
        self.record: dict | None = None  # tests: {"losses": [(job, loss)], "grads": [step's]}
        self.rows: ServedExchange | None = None  # parts=: this rank's row server and client

    # -- roles ----------------------------------------------------------------------------------
    def setup(self) -> None:
        """Groups, the sampler/trainer allocation, then each role's set-up."""
        topo = self.ctx.topo
        self.queue_group = None
        if topo.world_size > 1:
            self.queue_group = new_group(range(topo.world_size), purpose=Purpose.host)
        view = self.ctx.graph.x
        if topo.world_size > 1 and getattr(view, "held", None) is not None:
            # parts=: each rank serves its own rows whatever it is doing, so a trainer (or a
            # standby sampler, or the allocation's profile) fetches at its own pace
            self.rows = ServedExchange(view, served_groups(topo.world_size))
            view.remote = self.rows
        self.shared = self._use_shared_queue()
        tables = bool(sparse_parameters(self.ctx.model))
        if tables:  # sparse embedding tables: the shared queue's reduction, or data's (routes)
            check_sparse_tables(self.ctx.graph.name, self.staleness, self.switching,
                                "shared" if self.shared else "routes")
        if self.shared:  # samplers hold replicas only when they may train
            self.synced = self.switching
        elif self.synced:  # each step's reduction, all ranks
            self.reduce_group = new_group(range(topo.world_size), purpose=Purpose.host)
        self.alloc = self._allocation()
        trainers = self.alloc.trainers
        if not self.shared:  # fixed routes and one rank: one job per trainer and step
            self.jobs_per_trainer = 1
        elif self.jobs_per_trainer is None:
            self.jobs_per_trainer = auto_jobs_per_trainer(True, trainers, self.staleness)
        self.jobs_per_step = trainers * self.jobs_per_trainer  # J: a step's jobs (slots)
        self.schedule = self.schedule.replace(slots=self.jobs_per_step)
        if topo.rank == 0 and self.jobs_per_trainer > 1:
            print(f"factored: each step is {self.jobs_per_step} jobs ({self.jobs_per_trainer} "
                  f"per trainer) on the shared queue", flush=True)
        self.is_trainer = topo.rank < trainers
        if topo.world_size > 1:
            self.group = new_group(range(trainers), purpose=Purpose.trainers)
        self.takers = tuple(range(topo.world_size if self.synced else trainers))
        if self.shared:  # each step's per-slot reduction over the ranks that may train
            self.hosts = HostPlan.build(self._hosts(), trainers, self.jobs_per_trainer)
            self.takers = tuple(r for r in range(topo.world_size) if r < trainers or (
                self.switching and self.hosts.ring_of(r) is not None))
            self.reduce_group = new_group(self.takers, purpose=Purpose.host)
            #: each step's sparse gradients, gathered as the step is applied (SlotReducer)
            self.sparse_group = new_group(self.takers, purpose=Purpose.host) if tables else None
            self.relay_groups = (new_group(range(topo.world_size), purpose=Purpose.host),
                                 new_group(range(topo.world_size), purpose=Purpose.host)) \
                if self.hosts.remote else (None, None)  # requests, jobs
            self.synced = topo.rank in self.takers and self.switching
        self.reports = self.is_trainer
        self.train_topo = dataclasses.replace(topo, world_size=trainers,
                                              rank=topo.rank if self.is_trainer else 0)
        self.presample_time = 0.0
        self.hotness = presample_hotness(self)  # cache=presample: the samplers pre-sample
        if self.is_trainer:
            self.setup_training(self.train_topo)
        else:
            self._module = self.ctx.model.to(topo.device)
            self._sparse = sparse_parameters(self._module)
            self._optimizer = self.ctx.optim(self._module)
        if self.synced:
            sync_replicas(self)
        if self.shared:
            self.ring = shared.open_ring(self)

    def _use_shared_queue(self) -> bool:
        """``queue=shared`` where it can run: several ranks, on hosts with shared memory."""
        topo = self.ctx.topo
        if self.queue != "shared" or topo.world_size == 1:
            return False
        if not job_ring.available():
            if topo.rank == 0:
                print("factored: strategy.queue=shared needs memfd_create and /proc, which this "
                      "host lacks: jobs take fixed routes instead (strategy.queue=routes)",
                      flush=True)
            return False
        return True

    def _hosts(self) -> list[int]:
        """Every rank's host, named by the host's first rank (collective on the queue
        group)."""
        topo = self.ctx.topo
        mine = torch.tensor([topo.rank - topo.local_rank], dtype=torch.int64)
        got = [torch.zeros_like(mine) for _ in range(topo.world_size)]
        dist.all_gather(got, mine, group=self.queue_group)
        return [int(g) for g in got]

    def ring_jobs(self, steps: int) -> HostJobs:
        """The numbering of this rank's ring's jobs in an epoch of ``steps`` steps."""
        return self.hosts.jobs(self.hosts.ring_of(self.ctx.topo.rank), steps)

    def close(self) -> None:
        """Close this rank's view of the ring (the memory goes with the last rank) and, from
        parts, its row server once every peer is done asking."""
        if self.ring is not None:
            self.ring.close()
            self.ring = None
        super().close()
        if self.rows is not None:  # serves until every peer is done asking (parts=)
            self.rows.close()
            self.rows = None

    def _allocation(self) -> Allocation:
        """Fixed, or profiled on rank 0 and broadcast (``samplers=auto``)."""
        world = self.ctx.topo.world_size
        if world == 1:
            return Allocation(0, 1)
        if self.fixed_samplers is not None:
            return Allocation(self.fixed_samplers, world - self.fixed_samplers)
        msg = torch.zeros(3, dtype=torch.float64)
        if self.ctx.topo.rank == 0:
            t_s, t_t = profile(self)
            msg = torch.tensor([allocate(world, t_s, t_t), t_s, t_t], dtype=torch.float64)
        dist.broadcast(msg, 0, group=self.queue_group)
        alloc = Allocation(int(msg[0]), world - int(msg[0]), float(msg[1]), float(msg[2]))
        if self.ctx.topo.rank == 0:
            print(f"factored: T_s {alloc.t_sample * 1e3:.2f} ms, T_t {alloc.t_train * 1e3:.2f} "
                  f"ms per micro-batch, K = {alloc.k:.2f}: {alloc.samplers} sampler(s), "
                  f"{alloc.trainers} trainer(s) of {world} ranks", flush=True)
        return alloc

    # -- the schedule (data's with J slots: T on fixed routes) ----------------------------------
    def sampler_of(self, step: int, trainer: int) -> int:
        """The rank that samples job ``(step, trainer)``."""
        j = step * self.alloc.trainers + trainer
        return self.alloc.trainers + j % self.alloc.samplers

    # -- trainers -------------------------------------------------------------------------------
    def samples(self, jobs: list[Draw]) -> Iterator:
        """``(MiniBatch, seconds waited)`` of this trainer's jobs, in step order."""
        if self.alloc.samplers == 0:  # one rank: sample the whole epoch, then train
            t0 = time.perf_counter()
            drawn = [self.sample(job) for job in jobs]
            waited = time.perf_counter() - t0
            for job, mb in zip(jobs, drawn):
                self._consumed(job.epoch, job.step, 0)
                yield mb, waited
                waited = 0.0
            return
        layers = self.ctx.sampler.num_layers
        for job in jobs:
            epoch, step = job.epoch, job.step
            t0 = time.perf_counter()
            got_epoch, got_step, mb, nbytes = receive(
                self.sampler_of(step, self.train_topo.rank), layers, self.queue_group)
            if (got_epoch, got_step) != (epoch, step) or mb.num_targets != job.seeds.numel():
                raise RuntimeError(f"trainer {self.train_topo.rank} expected job (epoch {epoch}, "
                                   f"step {step}) and received (epoch {got_epoch}, step "
                                   f"{got_step})")
            self._consumed(epoch, step, nbytes)
            yield mb, time.perf_counter() - t0

    def _consumed(self, epoch: int, step: int, nbytes: int) -> None:
        self.job_log.append((epoch, step, self.train_topo.rank))
        self._received_bytes += nbytes

    def train_epoch(self, epoch: int, progress: Any = None) -> dict[str, float]:
        """One epoch in this rank's role (sampler or trainer), fixed routes or synchronised."""
        self.job_log, self.trained_log = [], []
        if self.synced or self.shared:
            return self._synced_epoch(epoch, progress)
        if not self.is_trainer:
            return self._sample_epoch(epoch)
        self._received_bytes = 0
        m = super().train_epoch(epoch, progress)
        return self._trainer_metrics(m)

    def _trainer_metrics(self, m: dict[str, float]) -> dict[str, float]:
        m["samples_consumed"] = float(len(self.job_log))
        m["bytes_queue_received"] = float(self._received_bytes)
        m["trainer_idle_time"] = m["sample_time"]
        m["trainer_busy_time"] = m["load_time"] + m["compute_time"]
        m["presample_time"] = self.presample_time
        # every trainer reports the same keys (summed over the trainers): rank 0 the run's
        stats = dict.fromkeys((*_SAMPLER_STATS, "samplers", "trainers", "measured_k"), 0.0)
        if self.train_topo.rank == 0:
            stats["samplers"], stats["trainers"] = self.alloc.samplers, self.alloc.trainers
            stats["measured_k"] = self.alloc.k
            for src in range(self.alloc.trainers, self.ctx.topo.world_size):
                got = torch.empty(len(_SAMPLER_STATS), dtype=torch.float64)
                dist.recv(got, src, group=self.queue_group, tag=STATS_TAG)
                for key, value in zip(_SAMPLER_STATS, got.tolist()):
                    stats[key] += value
                if self.shared:  # the jobs each standby trainer took
                    m[f"_jobs_rank_{src}"] = got[_SAMPLER_STATS.index("standby_jobs")].item()
                if src in self.takers and self.footprint is not None:  # a standby's jobs
                    visits = torch.empty_like(self.footprint.counts)
                    dist.recv(visits, src, group=self.queue_group, tag=FOOTPRINT_TAG)
                    self.footprint.counts += visits
            m["samples_consumed"] += stats["standby_jobs"]  # jobs the samplers trained
            if self.alloc.samplers == 0:
                stats["samples_produced"] = m["samples_consumed"]
                stats["sampler_busy_time"] = m["sample_time"]
        m.update(stats)
        return m

    # -- samplers -------------------------------------------------------------------------------
    def _sample_epoch(self, epoch: int) -> dict[str, float]:
        """Sample this rank's share of the epoch's jobs and send each to its trainer."""
        trainers, me = self.alloc.trainers, self.ctx.topo.rank
        sender = JobSender(self.queue_group, self.queue_depth)
        busy, t_epoch = 0.0, time.perf_counter()
        for step in range(self.schedule.num_steps(epoch)):
            for t in range(trainers):
                if self.sampler_of(step, t) != me:
                    continue
                t0 = time.perf_counter()
                mb = self.sample(self.schedule.draw(epoch, step, t))
                header, body = pack(mb, epoch, step)
                busy += time.perf_counter() - t0
                sender.send(t, header, body)
                self.job_log.append((epoch, step, t))
        sender.drain()
        elapsed = time.perf_counter() - t_epoch
        stats = torch.tensor([len(self.job_log), sender.bytes, busy, elapsed - busy, 0, 0, 0],
                             dtype=torch.float64)
        dist.send(stats, 0, group=self.queue_group, tag=STATS_TAG)
        return {"epoch_time": elapsed, "queue_peak_jobs": float(sender.peak_in_flight),
                **dict(zip(_SAMPLER_STATS, stats.tolist()))}

    # -- the shared queue, or routes with switching or staleness: reductions per step ----------
    def _synced_epoch(self, epoch: int, progress: Any = None) -> dict[str, float]:
        steps = self.schedule.num_steps(epoch)
        t_epoch = time.perf_counter()
        stats = StepStats()
        if not self.shared:
            self.reducer = StepReducer(self, stats)
        if not self.is_trainer:
            if self.shared:
                sender = shared.sampler_epoch(self, self.ring, epoch, steps, stats)
            else:
                sender = sampler_epoch(self, epoch, steps, stats)
            self.trained_log = stats.trained
            elapsed = time.perf_counter() - t_epoch
            busy = stats.sample_seconds
            out = torch.tensor([len(self.job_log), sender.bytes, busy, elapsed - busy -
                                stats.train_seconds - stats.load_seconds, stats.switch_events,
                                stats.train_seconds + stats.load_seconds, stats.jobs_trained],
                               dtype=torch.float64)
            dist.send(out, 0, group=self.queue_group, tag=STATS_TAG)
            if self.synced and self.footprint is not None:
                dist.send(self.footprint.counts, 0, group=self.queue_group, tag=FOOTPRINT_TAG)
                self.footprint.counts.zero_()
            return {"epoch_time": elapsed, "queue_peak_jobs": float(sender.peak_in_flight),
                    **dict(zip(_SAMPLER_STATS, out.tolist()))}
        self._received_bytes = 0
        self.store.reset_epoch()
        self.reset_edges()
        if self.shared:
            shared.taker_epoch(self, self.ring, epoch, steps, stats, progress)
        else:
            trainer_epoch(self, epoch, steps, stats, progress)
        self.trained_log = stats.trained
        self.job_log = list(stats.trained)
        m = {"epoch_time": time.perf_counter() - t_epoch, "steps": float(steps),
             "sample_time": stats.queue_wait, "load_time": stats.load_seconds,
             "compute_time": stats.train_seconds, "comm_time": stats.reduce_wait,
             # the mean over the step's J jobs (= the global batch), as every strategy reports
             "train_loss": stats.loss_sum / max(steps * self.jobs_per_step, 1),
             "edges_computed": float(stats.edges), "nodes_loaded": float(stats.nodes),
             "bytes_allreduce": float(stats.bytes_reduced)}
        m.update(self.store.epoch_stats())
        m.update(self.embedding_stats())
        m.update(self.edge_stats())
        m = self._trainer_metrics(m)
        m["trainer_idle_time"] = stats.queue_wait + stats.reduce_wait
        if self.shared:  # who trained how many jobs (summed over the trainers: one each)
            m["queue_shared"] = float(self.train_topo.rank == 0)
            for r in range(self.ctx.topo.world_size):
                m[f"queue_jobs_rank_{r}"] = m.pop(f"_jobs_rank_{r}", 0.0)
            m[f"queue_jobs_rank_{self.ctx.topo.rank}"] += float(stats.jobs_trained)
        return m
