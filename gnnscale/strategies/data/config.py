"""``strategy=data``'s typed schema (torch-free: the launcher composes and checks with it)."""

from __future__ import annotations

from dataclasses import dataclass

from gnnscale.registry import register


@register("strategy", "data")
@dataclass
class DataParallelConfig:
    """``strategy=data``'s options."""

    _target_: str = "gnnscale.strategies.data.DataParallel"
    batch_size: int = 1024  # global mini-batch (all ranks together)
    prefetch: int = 2  # mini-batches sampled ahead; 0 samples inline
    sample_workers: int = 0  # sampler processes per rank; 0 = the prefetch thread
