"""Partitioners (Hydra group ``partitioner``), the partition book, its quality and cache."""

from gnnscale.partition.base import Partitioner
from gnnscale.partition.book import PartitionBook
from gnnscale.partition.store import get_partition

__all__ = ["PartitionBook", "Partitioner", "get_partition"]
