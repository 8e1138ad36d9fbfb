"""``strategy=split``: every rank trains its split of one shared mini-batch (GSplit)."""

from gnnscale.strategies.split.config import SplitParallelConfig

__all__ = ["SplitParallel", "SplitParallelConfig"]


def __getattr__(name: str):
    """``SplitParallel`` on first use: its module imports torch, the config (above) does not."""
    if name == "SplitParallel":
        from gnnscale.strategies.split.strategy import SplitParallel

        return SplitParallel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
