"""Cache policies: a hotness score per vertex plus a budget (ratio of vertices, bytes or auto).

A policy only ranks vertices; :mod:`gnnscale.cache.store` picks the hottest ``capacity`` ones
(per placement) and serves gathers. Sampling-based policies (``presample``, ``oracle``) walk
epochs of the run's own :class:`~gnnscale.sampling.schedule.Schedule` (the task's training
items and seeds: under link prediction the endpoints of the positives and their negatives),
cut into one micro-batch per rank: pre-sampling uses stream ``PRESAMPLE``, so it never repeats
the draws of the epochs it predicts, and ``oracle`` replays stream ``TRAIN`` exactly,
micro-batch by micro-batch.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from gnnscale.cache.schemas import CacheConfig, Placement, memory_bytes
from gnnscale.data.graph import GraphStore
from gnnscale.distributed import device as device_seam
from gnnscale.sampling.base import Sampler
from gnnscale.sampling.schedule import PRESAMPLE, TRAIN, Schedule

__all__ = ["PRESAMPLE", "TRAIN", "CachePolicy", "visit_counts", "replayed", "auto_rows"]


def visit_counts(graph: GraphStore, *, schedule: Schedule, sampler: Sampler,
                 epochs: Iterable[int], shard: tuple[int, int] = (0, 1)) -> torch.Tensor:
    """How often every vertex is an input node of a draw of ``schedule`` (every slot of every
    step) over ``epochs`` (float64 ``[N]``): the task's seeds sampled exactly as training
    samples them.

    ``shard = (i, n)`` draws only the micro-batches ``j`` with ``j % n == i`` (``j`` counts the
    micro-batches of all ``epochs`` in order), so ``n`` workers split the draws and the sum of
    their counts equals the unsharded counts exactly (the counts are integers).
    """
    index, parts = shard
    if parts < 1 or not 0 <= index < parts:
        raise ValueError(f"shard must be (index, count) with 0 <= index < count, got {shard}")
    counts = torch.zeros(graph.num_nodes, dtype=torch.float64)
    j = 0
    for epoch in epochs:
        for draw in schedule.draws(epoch):
            if j % parts == index:
                mb = sampler.sample(graph, draw.seeds, seed=draw.sample_seed)
                counts += torch.bincount(mb.input_nodes.cpu(), minlength=graph.num_nodes)
            j += 1
    return counts


def replayed(schedule: Schedule | None, sampler: Sampler | None, policy: str, *,
             stream: int, world_size: int) -> Schedule:
    """``schedule`` on ``stream`` cut into one micro-batch per rank of ``world_size`` (what a
    sampling policy replays); a clear error when the policy lacks the schedule or sampler."""
    if sampler is None:
        raise ValueError(f"cache={policy} needs the configured sampler to sample epochs")
    if schedule is None:
        raise ValueError(f"cache={policy} samples the run's training schedule: pass "
                         "schedule= (the strategy's, or a Schedule of the training items)")
    return schedule.replace(stream=stream, slots=world_size)


class CachePolicy:
    """Which vertices to cache (``hotness``) and how many (``capacity``).

    ``ratio`` is the fraction of all vertices each rank caches; ``bytes`` (when set) replaces it
    with a byte budget per rank; ``auto`` (CUDA only) uses free device memory minus the measured
    peak of one training step, keeping ``reserve`` of the free memory spare. ``placement`` is
    ``replicated`` (every rank the same global hottest set) or ``partitioned`` (each rank the
    hottest vertices of its own partition, disjoint sets).
    """

    name = "base"

    def __init__(self, ratio: float = 0.0, bytes: int | None = None,
                 placement: str = "replicated", auto: bool = False,
                 reserve: float = 0.05, disk: bool | None = None, disk_depth: int = 64,
                 disk_block: int | None = None, memory_budget: str | int | None = None,
                 disk_order: str = "none", disk_ahead: int = 2,
                 feature_dtype: str = "float32", host_bytes: int | None = None) -> None:
        CacheConfig(ratio=ratio, bytes=bytes, placement=placement, reserve=reserve, disk=disk,
                    disk_depth=disk_depth, disk_block=disk_block,
                    memory_budget=memory_budget, disk_order=disk_order,
                    disk_ahead=disk_ahead, feature_dtype=feature_dtype,
                    host_bytes=host_bytes).check()
        self.ratio = float(ratio)
        self.bytes = bytes
        self.placement = Placement(placement).value
        self.auto = auto
        self.reserve = reserve
        #: the disk tier: None = when the features exceed :attr:`memory_budget`
        self.disk = disk
        self.disk_depth = int(disk_depth)
        self.disk_block = disk_block
        #: bytes of features a rank may hold in memory (None: dataset.memory_budget, else the
        #: host's memory; the runner passes the dataset's)
        self.memory_budget = memory_bytes(memory_budget)
        #: the disk tier's file order (:mod:`gnnscale.cache.layout`)
        self.disk_order = disk_order
        #: steps whose disk reads start while an earlier step computes
        self.disk_ahead = int(disk_ahead)
        #: the dtype the store's tiers hold (gathers return float32)
        self.feature_dtype = feature_dtype
        #: bytes of the host tier per rank (None: no host tier apart from the cache tier)
        self.host_bytes = host_bytes

    def hotness(self, graph: GraphStore, *, schedule: Schedule | None = None,
                sampler: Sampler | None = None, seed: int = 0,
                visits: torch.Tensor | None = None, world_size: int = 1) -> torch.Tensor:
        """Float ``[N]`` score, higher = hotter. Sampling policies replay ``schedule`` (the
        run's) with ``sampler``, one micro-batch per rank of ``world_size``; ``seed`` seeds
        ``random``; ``visits`` is used by ``oracle`` only."""
        raise NotImplementedError

    def capacity(self, num_nodes: int, row_bytes: int, *, device: torch.device | None = None,
                 peak_bytes: int | None = None, free_bytes: int | None = None) -> int:
        """Rows each rank caches: from ``bytes`` if set, else ``auto``, else ``ratio``."""
        if row_bytes <= 0:
            raise ValueError(f"row_bytes must be positive, got {row_bytes}")
        if self.bytes is not None:
            if self.bytes < row_bytes:
                raise ValueError(
                    f"cache.bytes={self.bytes} is below one feature row ({row_bytes} bytes): "
                    f"give at least {row_bytes} bytes, or use cache=none / cache.ratio")
            rows = self.bytes // row_bytes
        elif self.auto:
            rows = auto_rows(row_bytes, device=device, peak_bytes=peak_bytes,
                             free_bytes=free_bytes, reserve=self.reserve)
        else:
            rows = int(self.ratio * num_nodes + 1e-9)
        return int(min(rows, num_nodes))

    def __repr__(self) -> str:
        budget = f"bytes={self.bytes}" if self.bytes is not None else (
            "auto" if self.auto else f"ratio={self.ratio}")
        return f"{type(self).__name__}({budget}, placement={self.placement})"


def auto_rows(row_bytes: int, *, device: torch.device | None, peak_bytes: int | None,
              free_bytes: int | None = None, reserve: float = 0.05) -> int:
    """Rows that fit in ``free - peak - reserve * free`` (PaGraph/GNNLab's budget).

    ``free_bytes`` defaults to the CUDA device's free memory now; ``peak_bytes`` is the peak
    memory of one measured training step (the allocator's peak after it).
    """
    if free_bytes is None:
        if device is None or not device_seam.is_accelerator(device):
            raise ValueError("cache.auto sizes the cache from free GPU memory: it needs a CUDA "
                             "device (on CPU set cache.ratio or cache.bytes)")
        free_bytes = device_seam.free_bytes(device)
    if peak_bytes is None:
        raise ValueError("cache.auto needs peak_bytes: the measured peak memory of one "
                         "training step (run one step, read the allocator's peak)")
    budget = int(free_bytes * (1.0 - reserve)) - int(peak_bytes)
    return max(0, budget // row_bytes)
