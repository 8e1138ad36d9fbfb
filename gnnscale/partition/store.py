"""Partition books cached on disk, keyed by dataset checksum, partitioner config and part count.

Layout: ``<cache_root>/<checksum[:16]>/<option>-p<num_parts>-<config hash>/`` (a saved
:class:`PartitionBook`). ``cache_root`` defaults to ``partitions/`` next to the processed
dataset when ``graph.meta["processed_dir"]`` is known; otherwise nothing is cached. A changed
dataset (checksum) or config (hash) lands in another folder, so stale books are never read; a
graph with several node types also mixes :data:`TYPED_BALANCE` into the hash (its books balance
every node type since that marker was added, so older cached ones are not read).
A cached book is verified when it is loaded (digests in ``book.json``, see
:meth:`PartitionBook.load`): a damaged, truncated or edited file is named in a warning and the
book is computed again, never used.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnscale.data import processed
from gnnscale.data.graph import GraphStore
from gnnscale.partition.base import Partitioner
from gnnscale.partition.book import PartitionBook, PartitionBookError


def as_partitioner(spec: Partitioner | Mapping | Any) -> Partitioner:
    """A partitioner instance from itself or from a config node with ``_target_``."""
    if isinstance(spec, Partitioner):
        return spec
    from gnnscale import registry

    obj = registry.build(spec)
    if not isinstance(obj, Partitioner):
        raise TypeError(f"{type(obj).__name__} built from the partitioner config is no Partitioner")
    return obj


def graph_checksum(graph: GraphStore) -> str:
    """``graph.meta["checksum"]`` (set by processed.load), computed when missing."""
    if not graph.meta.get("checksum"):
        graph.meta["checksum"] = processed.checksum(graph)
    return graph.meta["checksum"]


#: mixed into the key of a book of a graph with several node types: since the partitioners
#: balance every node type (not only the total), such a book differs from the ones cached
#: before, which must not be read; an untyped graph's key (and book) is unchanged
TYPED_BALANCE = b"balance per node type"


def config_hash(partitioner: Partitioner, vertex_weight: torch.Tensor | None = None,
                typed: bool = False) -> str:
    """Hash of the partitioner's full config (and of runtime vertex weights when given);
    ``typed``: the graph has several node types (each balanced on its own)."""
    h = hashlib.blake2b(digest_size=8)
    h.update(json.dumps(partitioner.config(), sort_keys=True, default=str).encode())
    if typed:
        h.update(TYPED_BALANCE)
    if vertex_weight is not None:
        a = np.ascontiguousarray(torch.as_tensor(vertex_weight).double().numpy())
        h.update(a.reshape(-1).view(np.uint8).data)
    return h.hexdigest()


def default_cache_root(graph: GraphStore) -> Path | None:
    """``partitions/`` beside the graph's processed folder (None when it has none)."""
    d = graph.meta.get("processed_dir")
    return Path(d).parent / "partitions" if d else None


def cache_dir(
    graph: GraphStore, partitioner: Partitioner, num_parts: int, cache_root: str | os.PathLike,
    vertex_weight: torch.Tensor | None = None,
) -> Path:
    """The cache folder of one book: graph checksum, partitioner, parts, config hash."""
    digest = config_hash(partitioner, vertex_weight, typed=len(graph.node_types) > 1)
    key = f"{partitioner.name}-p{num_parts}-{digest}"
    return Path(os.path.expanduser(str(cache_root))) / graph_checksum(graph)[:16] / key


def get_partition(
    graph: GraphStore, partitioner: Partitioner | Mapping | Any, num_parts: int,
    cache_root: str | os.PathLike | None = None, log: Callable[[str], None] | None = print,
    vertex_weight: torch.Tensor | None = None,
) -> PartitionBook:
    """The partition book of ``graph``: loaded from the cache when present, else computed
    (and saved). ``partitioner`` is an instance or its config node."""
    log = log or (lambda _msg: None)
    part = as_partitioner(partitioner)
    root = cache_root if cache_root is not None else default_cache_root(graph)
    if root is None:
        log(f"partition: no cache root (graph.meta has no processed_dir): computing {part.name}")
        return part.partition(graph, num_parts, vertex_weight=vertex_weight)
    book = cached_partition(graph, part, num_parts, root, log, vertex_weight)
    if book is not None:
        return book
    folder = cache_dir(graph, part, num_parts, root, vertex_weight)
    book = part.partition(graph, num_parts, vertex_weight=vertex_weight)
    book.meta["checksum"] = graph_checksum(graph)
    book.save(folder)
    log(f"partition: computed {part.name} p={num_parts} in {book.quality['time_s']:.2f}s, "
        f"saved to {folder}")
    return book


def cached_partition(
    graph: GraphStore, partitioner: Partitioner | Mapping | Any, num_parts: int,
    cache_root: str | os.PathLike | None = None, log: Callable[[str], None] | None = print,
    vertex_weight: torch.Tensor | None = None,
) -> PartitionBook | None:
    """The cached book :func:`get_partition` would load, or None when the cache has none that
    fits the graph (missing, damaged, or of another graph): nothing is computed."""
    log = log or (lambda _msg: None)
    part = as_partitioner(partitioner)
    root = cache_root if cache_root is not None else default_cache_root(graph)
    if root is None:
        return None
    folder = cache_dir(graph, part, num_parts, root, vertex_weight)
    if not (folder / "book.json").is_file():
        return None
    try:
        book = PartitionBook.load(folder)
    except PartitionBookError as err:
        warnings.warn(f"partition cache damaged: {err}; computing the book again",
                      stacklevel=2)
        log(f"partition: damaged cache {err.file}; recomputing")
        return None
    except (OSError, ValueError) as err:
        log(f"partition: unreadable cache at {folder} ({err}); recomputing")
        return None
    if book.meta.get("checksum") == graph_checksum(graph) and book.num_nodes == \
            graph.num_nodes and book.num_parts == num_parts:
        log(f"partition: loaded cached {part.name} p={num_parts} from {folder}")
        return book
    log(f"partition: cache at {folder} does not match the graph; recomputing")
    return None
