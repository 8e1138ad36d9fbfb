"""``strategy=data``: data-parallel mini-batches (DGL/PyG, PaGraph, Quiver)."""

from gnnscale.strategies.data.strategy import DataParallel, DataParallelConfig

__all__ = ["DataParallel", "DataParallelConfig"]
