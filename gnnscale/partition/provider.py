"""Partition providers: what a strategy asks for a partition book.

A strategy asks for ``num_parts`` parts of a ``kind`` (``edge_cut`` or ``vertex_cut``), with
optional per-vertex weights; the provider refuses a book of the wrong kind or size with a
message that names the key to change. :class:`CachedPartitions` is the runner's (books computed
once by the group's first rank and cached on disk); :class:`FixedPartition` serves a given book
(tests, benchmarks).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from gnnscale.data.graph import GraphStore
from gnnscale.partition.book import KINDS, PartitionBook

EDGE_CUTS = ("metis", "random", "range", "ldg", "fennel")
VERTEX_CUTS = ("oec", "iec", "cvc", "hvc")


def check_book(book: PartitionBook, num_parts: int, kind: str | None, name: str) -> None:
    """Refuse a book with another number of parts or of another kind."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS} or None, got {kind!r}")
    if book.num_parts != num_parts:
        raise ValueError(f"the partition book of partitioner={name} has {book.num_parts} parts "
                         f"but {num_parts} are needed (one per rank)")
    if kind is not None and book.kind != kind:
        options = EDGE_CUTS if kind == "edge_cut" else VERTEX_CUTS
        raise ValueError(f"partitioner={name} gives a {book.kind.replace('_', '-')} but this "
                         f"strategy needs an {kind.replace('_', '-')}: use partitioner="
                         f"{'|'.join(options)}")


class PartitionProvider(ABC):
    """``get(num_parts, kind, vertex_weights)`` -> a checked :class:`PartitionBook`."""

    #: True when the partitioner weighs vertices by how often they are sampled (GSplit).
    wants_sample_frequency: bool = False

    @abstractmethod
    def get(self, num_parts: int, kind: str | None = None,
            vertex_weights: torch.Tensor | None = None) -> PartitionBook:
        """The book with ``num_parts`` parts of ``kind`` (None: any); collective for the
        runner's provider (every rank of its group calls it)."""


class FixedPartition(PartitionProvider):
    """Serves one given book (checked against each request)."""

    def __init__(self, book: PartitionBook, name: str = "fixed") -> None:
        self.book, self.name = book, name

    def get(self, num_parts: int, kind: str | None = None,
            vertex_weights: torch.Tensor | None = None) -> PartitionBook:
        """A partition book with ``num_parts`` parts of ``kind``, checked for size and kind."""
        check_book(self.book, num_parts, kind, self.name)
        return self.book


class CachedPartitions(PartitionProvider):
    """The runner's provider: ``partitioner`` config, books cached under ``cache_root``.

    The group's first rank computes (or loads) a book, then the others load it from the cache,
    so the partitioner runs once per run (collective on ``group``: barrier).
    """

    def __init__(self, graph: GraphStore, partitioner: Any, cache_root: str | Path,
                 group: dist.ProcessGroup | None = None,
                 log: Callable[[str], None] | None = print) -> None:
        from gnnscale.partition.store import as_partitioner

        self.graph, self.root, self.group, self.log = graph, Path(cache_root), group, log
        self.partitioner = as_partitioner(partitioner)
        self.name = self.partitioner.name
        self.wants_sample_frequency = \
            getattr(self.partitioner, "vertex_weights", "none") == "sample_frequency"
        self._books: dict[tuple[int, bool], PartitionBook] = {}

    def get(self, num_parts: int, kind: str | None = None,
            vertex_weights: torch.Tensor | None = None) -> PartitionBook:
        """A partition book with ``num_parts`` parts of ``kind``, checked for size and kind."""
        from gnnscale.partition.store import get_partition

        if self.wants_sample_frequency and vertex_weights is None:
            raise ValueError("partitioner.vertex_weights=sample_frequency weighs vertices by how "
                             "often they are sampled, but this strategy samples nothing: use "
                             "partitioner.vertex_weights=none")
        key = (num_parts, vertex_weights is not None)
        if key not in self._books:
            first = not dist.is_initialized() or dist.get_rank(self.group) == 0
            run = lambda: get_partition(self.graph, self.partitioner, num_parts,  # noqa: E731
                                        cache_root=self.root, log=self.log if first else None,
                                        vertex_weight=vertex_weights)
            if first:
                self._books[key] = run()
            if dist.is_initialized():
                dist.barrier(group=self.group)
            if not first:
                self._books[key] = run()
        book = self._books[key]
        check_book(book, num_parts, kind, self.name)
        return book
