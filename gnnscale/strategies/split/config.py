"""``strategy=split``'s typed schema (torch-free: the launcher composes and checks with it)."""

from __future__ import annotations

from dataclasses import dataclass

from gnnscale.registry import register

SAMPLE_ON = ("all", "leader")


@register("strategy", "split")
@dataclass
class SplitParallelConfig:
    """``strategy=split``'s options."""

    _target_: str = "gnnscale.strategies.split.SplitParallel"
    batch_size: int = 1024  # global mini-batch, split over the ranks by owner
    prefetch: int = 2  # mini-batches sampled and split ahead; 0 = inline
    preaggregate: bool = False  # senders average edges into remote destinations (SAGE)
    sample_workers: int = 0  # sampler processes per sampling rank; 0 = the prefetch thread
    # all: step s is sampled and split by rank s mod world, which sends each rank its part
    # (GSplit's parallel split-samplers); leader: rank 0 samples every step and broadcasts it
    sample_on: str = "all"
