"""Partitioners (Hydra group ``partitioner``), the partition book, its quality and cache
(``schemas``: the options' typed configs, torch-free)."""

import importlib

_EXPORTS = {"Partitioner": "gnnscale.partition.base", "PartitionBook": "gnnscale.partition.book",
            "get_partition": "gnnscale.partition.store"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """The exports on first use (they import torch; the schemas do not)."""
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
