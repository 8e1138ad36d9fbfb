"""``strategy=data``'s typed schema and declarations (torch-free: the launcher composes and
checks with it; ``DataParallel`` takes its declarations from here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from gnnscale.registry import register
from gnnscale.schema import Reduce
from gnnscale.strategies.config import SamplingConfig


@register("strategy", "data")
@dataclass
class DataParallelConfig(SamplingConfig):
    """``strategy=data``'s options: one micro-batch per rank, every dependency replicated."""

    name: ClassVar[str] = "data"
    deps: ClassVar[str] = "replicate"
    default_deps: ClassVar[str] = "depcache"
    default_cache: ClassVar[str] = "presample"  # PaGraph/GNNLab's pre-sampled cache
    trains_types: ClassVar[bool] = True  # typed inputs, sparse embedding gradients reduced
    #: parts=: the whole topology and labels, its own feature rows, the others' from owners
    from_parts: ClassVar[bool] = True
    takes_edge_features: ClassVar[bool] = True  # gathered from the blocks' edge ids
    reductions: ClassVar[dict[str, Reduce]] = {  # per rank: each holds the whole tables
        "embedding_rows_held": Reduce.max, "embedding_bytes": Reduce.max,
        "embedding_rows_touched": Reduce.mean,
        "bytes_edge_features": Reduce.sum}  # edge feature rows read from the host
    _target_: str = "gnnscale.strategies.data.DataParallel"
    batch_size: int = 1024  # global mini-batch (all ranks together)
    prefetch: int = 2  # mini-batches sampled ahead; 0 samples inline
    sample_workers: int = 0  # sampler processes per rank; 0 = the prefetch thread
