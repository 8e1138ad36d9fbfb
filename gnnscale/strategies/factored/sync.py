"""The world-synchronised step loop of the factored strategy: dynamic switching and staleness.

Used when ``strategy.switching=true`` or ``strategy.staleness > 0``. Every rank (samplers
included) keeps a replica of the model and joins **every step's reduction** on a group of all
ranks: it sums, over the jobs it trained in that step, the gradients of ``loss / T`` (T jobs
per step), and contributes zeros when it trained none. The reduced buffer is the step's mean
gradient, so every rank applies the same optimizer step and the replicas stay equal; with
``staleness=0`` a step therefore equals one process accumulating the step's T micro-batches,
whoever trained them. Three scalars ride along: the loss sum, and the trainers' seconds and
jobs (the profit metric's T_t).

A sampler samples its jobs up to ``queue_depth`` steps ahead and hands step ``s``'s jobs to the
queue when it reaches step ``s``. Once it has sampled its whole share of the epoch it is a
standby trainer (GNNLab section 5.3): before each step it computes
``P = M_r * T_t / N_t - T_t'`` (``M_r`` jobs left in the epoch, ``N_t`` trainers, ``T_t`` the
trainers' last measured seconds per job, ``T_t'`` its own, the trainers' until it has trained
one) and, when ``P > 0``, keeps one of its jobs of that step, trains it (features straight from
the host: a standby trainer has no cache) and sends the trainer a *taken* marker instead. It
goes back to sampling at the epoch's end.

``staleness=k``: reductions are asynchronous; before its step ``s + 1`` a rank waits only for
the reduction of step ``s - k`` and applies it, so ranks run up to ``k`` steps ahead of the
slowest and a step's update reaches the parameters ``k`` steps late (the same on every rank).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from gnnscale.sampling.base import MiniBatch
from gnnscale.strategies.base import dropout_step_key
from gnnscale.strategies.factored.protocol import FactoredRun
from gnnscale.strategies.factored.queue import JobSender, pack, receive, taken_marker

EXTRA = 3  # loss sum, trainers' seconds, trainers' jobs


@dataclass
class StepStats:
    """One rank's accounting of an epoch of the synchronised loop."""

    train_seconds: float = 0.0  # forward/backward of the jobs this rank trained
    load_seconds: float = 0.0
    queue_wait: float = 0.0  # waiting on the queue (trainers) or on sends (samplers)
    reduce_wait: float = 0.0  # waiting on step reductions
    sample_seconds: float = 0.0
    loss_sum: float = 0.0  # over all jobs of the epoch (from the reductions)
    jobs_trained: int = 0
    switch_events: int = 0  # steps where this (sampler) rank took a job
    bytes_reduced: int = 0
    edges: int = 0
    nodes: int = 0
    last_t_train: float = 0.0  # trainers' seconds per job, last reduction
    own_t_train: float = 0.0  # this rank's seconds per job (standby trainers)
    trained: list = field(default_factory=list)  # (epoch, step, slot) trained here


class StepReducer:
    """Launches each step's contribution as an async all-reduce; applies them in order,
    waiting for step ``s - staleness`` before step ``s + 1``."""

    def __init__(self, strat: FactoredRun, stats: StepStats) -> None:
        self.strat, self.stats = strat, stats
        self.params = [p for p in strat._module.parameters() if p.requires_grad]
        self.pending: deque = deque()

    def contribute(self, loss_sum: float, seconds: float, jobs: int) -> None:
        """Launch this rank's share of a step's reduction (gradients, loss, seconds, jobs)."""
        grads = [p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel())
                 for p in self.params]
        buf = torch.cat([g.detach().cpu().double() for g in grads]
                        + [torch.tensor([loss_sum, seconds, jobs], dtype=torch.float64)])
        self.stats.bytes_reduced += buf.numel() * buf.element_size()
        work = dist.all_reduce(buf, group=self.strat.reduce_group, async_op=True)
        self.pending.append((work, buf))
        for p in self.params:
            p.grad = None

    def apply(self, keep: int) -> None:
        """Apply reductions until at most ``keep`` are outstanding."""
        while len(self.pending) > keep:
            work, buf = self.pending.popleft()
            t0 = time.perf_counter()
            work.wait()
            self.stats.reduce_wait += time.perf_counter() - t0
            pos = 0
            for p in self.params:
                p.grad = buf[pos: pos + p.numel()].view_as(p).to(p.dtype).to(p.device)
                pos += p.numel()
            if self.strat.record is not None:
                self.strat.record["grads"].append(grad_copies(self.params))
            self.strat._optimizer.step()
            for p in self.params:
                p.grad = None
            loss, seconds, jobs = buf[pos:].tolist()
            self.stats.loss_sum += loss
            if jobs > 0:
                self.stats.last_t_train = seconds / jobs


def grad_copies(params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Copies of ``params``' gradients, each set (a step's, as it is applied): what a test's
    ``record["grads"]`` keeps."""
    out = []
    for p in params:
        assert p.grad is not None, "a step's parameter has no gradient"
        out.append(p.grad.clone())
    return out


def train_job(strat: FactoredRun, mb: MiniBatch, x: torch.Tensor, y: torch.Tensor, stats: StepStats,
              slot: tuple[int, int, int]) -> float:
    """Forward and backward of one job, gradients of ``loss / J`` accumulated (J: a step's
    jobs, T on fixed routes); returns the loss."""
    module = strat._module
    module.train()
    t0 = time.perf_counter()
    module.set_dropout_key(strat.ctx.seed, dropout_step_key(slot[0], slot[1]))
    try:
        out = module(x, [b.to(x.device) for b in mb.blocks])
    finally:
        module.set_dropout_key(None)
    loss = strat.ctx.task.loss(out, y)
    (loss / strat.jobs_per_step).backward()
    stats.train_seconds += time.perf_counter() - t0
    stats.jobs_trained += 1
    stats.edges += mb.num_edges
    stats.nodes += mb.input_nodes.numel()
    stats.trained.append(slot)
    value = float(loss.detach())
    if strat.record is not None:
        strat.record["losses"].append((slot, value))
    return value


def trainer_epoch(strat: FactoredRun, epoch: int, steps: int, stats: StepStats,
                  progress: Any = None) -> None:
    """A trainer: each of the ``steps`` steps, its job from the queue (or a taken marker), then
    the reduction."""
    me, layers, dev = strat.train_topo.rank, strat.ctx.sampler.num_layers, strat.ctx.topo.device
    for step in range(steps):
        t0 = time.perf_counter()
        got_epoch, got_step, mb, nbytes = receive(strat.sampler_of(step, me), layers,
                                                  strat.queue_group)
        stats.queue_wait += time.perf_counter() - t0
        if (got_epoch, got_step) != (epoch, step):
            raise RuntimeError(f"trainer {me} expected job (epoch {epoch}, step {step}) and "
                               f"received (epoch {got_epoch}, step {got_step})")
        strat._received_bytes += nbytes
        loss, seconds, jobs = 0.0, 0.0, 0
        if mb is not None:
            t1 = time.perf_counter()
            strat.visited(mb.input_nodes)
            x = strat.gather(mb)
            y = strat.schedule.target(epoch, step, me).to(dev)
            stats.load_seconds += time.perf_counter() - t1
            before = stats.train_seconds
            loss = train_job(strat, mb, x, y, stats, (epoch, step, me))
            seconds, jobs = stats.train_seconds - before, 1
        strat.reducer.contribute(loss, seconds, jobs)
        strat.reducer.apply(strat.staleness)
        if progress is not None:
            progress.update(1)
    strat.reducer.apply(0)


def _profit(remaining: int, trainers: int, t_train: float, own: float) -> float:
    """GNNLab's profit metric P for a standby trainer (section 5.3)."""
    return float("inf") if trainers == 0 else remaining * t_train / trainers - own


def sampler_epoch(strat: FactoredRun, epoch: int, steps: int, stats: StepStats) -> JobSender:
    """A sampler: sample ahead, hand each of the ``steps`` steps' jobs out, train one as a
    standby trainer while the profit metric is positive, and join every step's reduction."""
    trainers, me = strat.alloc.trainers, strat.ctx.topo.rank
    sender = JobSender(strat.queue_group, strat.queue_depth)
    ready: dict[int, list] = {}

    def sample_step(step: int) -> None:
        t0 = time.perf_counter()
        ready[step] = []
        for t in range(trainers):
            if strat.sampler_of(step, t) == me:
                mb = strat.sample(strat.schedule.draw(epoch, step, t))
                ready[step].append((t, mb))
                strat.job_log.append((epoch, step, t))
        stats.sample_seconds += time.perf_counter() - t0

    ahead = 0
    while ahead < min(steps, strat.queue_depth):
        sample_step(ahead)
        ahead += 1
    took_last: set[int] = set()  # never the same trainer's job two steps running
    for step in range(steps):
        kept = None
        for t, mb in ready.pop(step):
            t_train = stats.last_t_train or strat.alloc.t_train
            own = stats.own_t_train or t_train
            remaining = (steps - step) * trainers
            if (strat.switching and ahead == steps and kept is None and t not in took_last
                    and _profit(remaining, trainers, t_train, own) > 0):
                kept = (t, mb)
                stats.switch_events += 1
                sender.send(t, taken_marker(strat.ctx.sampler.num_layers, epoch, step, me), None)
            else:
                header, body = pack(mb, epoch, step)
                sender.send(t, header, body)
        if ahead < steps:
            sample_step(ahead)
            ahead += 1
        loss = 0.0
        took_last = {kept[0]} if kept is not None else set()
        if kept is not None:
            t, mb = kept
            strat.visited(mb.input_nodes)  # sent to rank 0 at the epoch's end (footprint)
            t0 = time.perf_counter()
            x = strat.host_gather(mb)
            y = strat.schedule.target(epoch, step, t)
            stats.load_seconds += time.perf_counter() - t0
            before = stats.train_seconds
            loss = train_job(strat, mb, x, y, stats, (epoch, step, t))
            stats.own_t_train = stats.train_seconds - before
        strat.reducer.contribute(loss, 0.0, 0)  # T_t is the trainers' time only
        strat.reducer.apply(strat.staleness)
    strat.reducer.apply(0)
    sender.drain()
    stats.queue_wait += sender.wait_seconds
    return sender


def sync_replicas(strat: FactoredRun) -> None:
    """Every rank starts from rank 0's parameters and buffers (samplers hold replicas)."""
    for tensor in [*strat._module.parameters(), *strat._module.buffers()]:
        dist.broadcast(tensor.data, 0, group=strat.reduce_group)
