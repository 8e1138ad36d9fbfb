"""``strategy=split``: every rank trains its split of one shared mini-batch (GSplit)."""

from gnnscale.strategies.split.strategy import SplitParallel, SplitParallelConfig

__all__ = ["SplitParallel", "SplitParallelConfig"]
