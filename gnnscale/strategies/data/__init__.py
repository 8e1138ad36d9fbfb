"""``strategy=data``: data-parallel mini-batches (DGL/PyG, PaGraph, Quiver)."""

from gnnscale.strategies.data.config import DataParallelConfig

__all__ = ["DataParallel", "DataParallelConfig"]


def __getattr__(name: str):
    """``DataParallel`` on first use: its module imports torch, the config (above) does not."""
    if name == "DataParallel":
        from gnnscale.strategies.data.strategy import DataParallel

        return DataParallel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
