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
from gnnscale.distributed.collectives import all_reduce_host
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

    The group's first rank computes (or loads) a book; every other rank takes that very book:
    from its own cache when the copy there is the same (its digest), else over the group, and
    then keeps it in its cache. So the partitioner runs once per run, and ranks on hosts with
    their own data folders (no shared filesystem) train on the first rank's book, never on one
    they computed themselves (collective on ``group``).
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

        if self.wants_sample_frequency and vertex_weights is None:
            raise ValueError("partitioner.vertex_weights=sample_frequency weighs vertices by how "
                             "often they are sampled, but this strategy samples nothing: use "
                             "partitioner.vertex_weights=none")
        key = (num_parts, vertex_weights is not None)
        if key not in self._books:
            self._books[key] = self._first_ranks_book(num_parts, vertex_weights)
        book = self._books[key]
        check_book(book, num_parts, kind, self.name)
        return book

    def _first_ranks_book(self, num_parts: int,
                          vertex_weights: torch.Tensor | None) -> PartitionBook:
        """The group's first rank's book, on every rank of the group."""
        from gnnscale.partition.store import cache_dir, cached_partition, get_partition

        first = not dist.is_initialized() or dist.get_rank(self.group) == 0
        args = (self.graph, self.partitioner, num_parts, self.root)
        book = get_partition(*args, log=self.log, vertex_weight=vertex_weights) if first \
            else None
        if not dist.is_initialized() or dist.get_world_size(self.group) == 1:
            return _held(book)
        src = dist.get_global_rank(self.group, 0) if self.group is not None else 0
        digest = [book.fingerprint() if book is not None and first else None]
        dist.broadcast_object_list(digest, src=src, group=self.group)
        if not first:
            book = cached_partition(*args, log=None, vertex_weight=vertex_weights)
        missing = not first and (book is None or book.fingerprint() != digest[0])
        need = torch.tensor([int(missing)], dtype=torch.int64)
        all_reduce_host(need, dist.ReduceOp.MAX, group=self.group)
        if not need.item():
            return _held(book)
        sent: list[dict | None] = [book.payload() if book is not None and first else None]
        dist.broadcast_object_list(sent, src=src, group=self.group)
        if missing and sent[0] is not None:  # this host's cache lacks it: keep it there
            book = PartitionBook.from_payload(sent[0])
            if self.root is not None:
                book.save(cache_dir(self.graph, self.partitioner, num_parts, self.root,
                                    vertex_weights))
        return _held(book)


def _held(book: PartitionBook | None) -> PartitionBook:
    """The book this rank holds once the group agreed on it (every rank holds one then)."""
    if book is None:
        raise RuntimeError("this rank holds no partition book after the group agreed on one")
    return book
