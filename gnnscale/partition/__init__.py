"""Partitioners (Hydra group ``partitioner``), the partition book, its quality and cache
(``schemas``: the options' typed configs, torch-free), and the partitioned layout a run on
several hosts trains from (``layout``: its format and checks, torch-free; ``parts``: writing
it and a host's view of its part; ``python -m gnnscale.partition``: ``cli``)."""

from gnnscale.lazy import lazy_exports

_EXPORTS = {"Partitioner": "gnnscale.partition.base", "PartitionBook": "gnnscale.partition.book",
            "get_partition": "gnnscale.partition.store"}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)  # they import torch; the schemas do not
