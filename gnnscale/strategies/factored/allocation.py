"""How many ranks sample in the factored strategy: GNNLab's rule (section 5.3).

K = T_t / T_s (how many trainers one sampler keeps busy), N_s = ceil(N / (K + 1)), clamped to
[1, N - 1] so that both roles exist; one rank (N = 1) has no sampler (it samples the whole
epoch, then trains).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from gnnscale.distributed import device as device_seam
from gnnscale.sampling.base import MiniBatch
from gnnscale.sampling.schedule import PRESAMPLE, Schedule
from gnnscale.strategies.factored.config import parse_samplers  # noqa: F401 - re-exported


@dataclass
class Allocation:
    """The roles of a run: ``samplers`` ranks sample, the others train; measured times (s per
    micro-batch) when the allocation was profiled."""

    samplers: int
    trainers: int
    t_sample: float = 0.0
    t_train: float = 0.0

    @property
    def k(self) -> float:
        """Trainers one sampler keeps busy (T_t / T_s); 0 when nothing was measured."""
        return self.t_train / self.t_sample if self.t_sample > 0 else 0.0


def allocate(world: int, t_sample: float, t_train: float) -> int:
    """Sampler ranks for ``world`` ranks given the per-micro-batch sampling and training times."""
    if world < 2:
        return 0
    if t_sample <= 0:
        return 1
    k = t_train / t_sample
    return min(max(math.ceil(world / (k + 1)), 1), world - 1)


class Profiled(Protocol):
    """What :func:`profile` reads of a strategy (the factored one, as it is set up)."""

    @property
    def ctx(self) -> Any:
        """The run's :class:`~gnnscale.strategies.base.RunContext` (model, graph, task, sampler,
        topology; a sampling strategy's has its sampler and task)."""

    @property
    def schedule(self) -> Schedule:
        """The run's schedule of micro-batches."""

    def host_gather(self, mb: MiniBatch) -> torch.Tensor:
        """``mb``'s input features in host memory."""


def profile(strategy: Profiled, steps: int = 3) -> tuple[float, float]:
    """Mean seconds to sample and to train (gather, forward, backward) one micro-batch of one
    rank's share under ``data``, over ``steps`` pre-sampling-stream micro-batches after a
    warm-up; parameters, gradients and the RNG are left as they were."""
    ctx = strategy.ctx
    schedule = strategy.schedule.replace(stream=PRESAMPLE, slots=ctx.topo.world_size)
    first = range(min(steps + 1, schedule.num_steps(0)))
    model, dev = ctx.model.to(ctx.topo.device), ctx.topo.device
    t_s, t_t, n = 0.0, 0.0, 0
    with torch.random.fork_rng(devices=device_seam.rng_devices(dev)):
        for draw in schedule.draws(0, slots=[0], steps=first):
            t0 = time.perf_counter()
            mb = ctx.sampler.sample(ctx.graph, draw.seeds, draw.sample_seed)
            t1 = time.perf_counter()
            x = strategy.host_gather(mb).to(dev)
            out = model(x, [b.to(dev) for b in mb.blocks])
            ctx.task.loss(out, draw.target.to(dev)).backward()
            device_seam.synchronize(dev)
            t2 = time.perf_counter()
            if draw.step > 0:  # step 0 warms up (lazy initialisation, caches)
                t_s, t_t, n = t_s + t1 - t0, t_t + t2 - t1, n + 1
    model.zero_grad(set_to_none=True)
    return (t_s / n, t_t / n) if n else (0.0, 0.0)
