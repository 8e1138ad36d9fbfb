"""The graph store: a CSC graph with node features, labels and splits.

CSC means ``indptr`` runs over destinations and ``indices`` holds the sources, so the
in-neighbors of ``v`` are ``indices[indptr[v]:indptr[v + 1]]`` -- exactly what a GNN layer
aggregates. Arrays are plain tensors; loaded from the processed format they are memory-mapped
copy-on-write, so ranks spawned on one host share the pages instead of copying them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

SELF_LOOP_MODES = ("keep", "remove", "add")
#: Link-prediction split edges a graph may carry (``GraphStore.links``), each ``[2, E]`` int64.
LINK_ARRAYS = ("train_pos", "val_pos", "val_neg", "test_pos", "test_neg")


def check_csc(indptr: torch.Tensor, indices: torch.Tensor, num_nodes: int) -> None:
    """CSC invariants the native ops rely on: ``indptr`` starts at 0 and never decreases,
    ``indices`` lie in ``[0, num_nodes)``. Raises ``ValueError`` saying which one fails."""
    if int(indptr[0]) != 0:
        raise ValueError(f"indptr[0] = {int(indptr[0])}, must be 0")
    if num_nodes and bool((indptr[1:] < indptr[:-1]).any()):
        at = int((indptr[1:] < indptr[:-1]).nonzero()[0])
        raise ValueError(f"indptr decreases at vertex {at} ({int(indptr[at])} -> "
                         f"{int(indptr[at + 1])}): it must be non-decreasing")
    _check_range(indices, num_nodes, "indices hold")


def check_ids(ids: torch.Tensor | None, num_nodes: int, what: str) -> None:
    """``ids`` (a split) must be an integer id list in ``[0, num_nodes)``."""
    if ids is None:
        return
    if ids.is_floating_point() or ids.dtype == torch.bool or ids.dim() != 1:
        raise ValueError(f"{what} must be a 1-D integer id list, got {ids.dtype} "
                         f"{tuple(ids.shape)}")
    _check_range(ids, num_nodes, f"{what} holds")


def _check_range(ids: torch.Tensor, num_nodes: int, subject: str) -> None:
    """Every id in ``[0, num_nodes)``, else a ValueError: ``<subject> ids in [lo, hi] ...``."""
    if ids.numel():
        lo, hi = torch.aminmax(ids)
        if int(lo) < 0 or int(hi) >= num_nodes:
            raise ValueError(f"{subject} ids in [{int(lo)}, {int(hi)}] but there are "
                             f"{num_nodes} nodes")


def check_link_edges(edges: torch.Tensor, num_nodes: int, name: str) -> None:
    """A link split's edge array: ``[2, E]`` integer ids in ``[0, num_nodes)``."""
    if name not in LINK_ARRAYS:
        raise ValueError(f"unknown link split array {name!r}; known: {', '.join(LINK_ARRAYS)}")
    if edges.dim() != 2 or edges.shape[0] != 2:
        raise ValueError(f"{name} must have shape [2, E], got {tuple(edges.shape)}")
    if edges.is_floating_point() or edges.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer node ids, got {edges.dtype}")
    _check_range(edges, num_nodes, f"{name} holds")


@dataclass
class GraphStore:
    """A graph in CSC form plus everything a node-classification run needs; ``links`` holds
    a link-prediction split's edges when the dataset provides one (:data:`LINK_ARRAYS`)."""

    indptr: torch.Tensor
    indices: torch.Tensor
    x: torch.Tensor | None = None
    y: torch.Tensor | None = None
    train_idx: torch.Tensor | None = None
    val_idx: torch.Tensor | None = None
    test_idx: torch.Tensor | None = None
    edge_weight: torch.Tensor | None = None
    num_classes: int = 0
    name: str = "graph"
    meta: dict = field(default_factory=dict)
    links: dict[str, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.indptr.dtype != torch.int64:
            raise TypeError(f"indptr must be int64, got {self.indptr.dtype}")
        if self.indices.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"indices must be int64 or int32, got {self.indices.dtype}")
        if self.indptr.dim() != 1 or self.indptr.numel() < 1:
            raise ValueError("indptr must be a 1-D tensor of length num_nodes + 1")
        if int(self.indptr[-1]) != self.indices.numel():
            raise ValueError(
                f"indptr[-1] = {int(self.indptr[-1])} but there are {self.indices.numel()} indices"
            )
        n = self.num_nodes
        check_csc(self.indptr, self.indices, n)
        for split in ("train_idx", "val_idx", "test_idx"):
            check_ids(getattr(self, split), n, split)
        if self.x is not None and self.x.shape[0] != n:
            raise ValueError(f"x has {self.x.shape[0]} rows for {n} nodes")
        if self.y is not None and self.y.shape[0] != n:
            raise ValueError(f"y has {self.y.shape[0]} entries for {n} nodes")
        if self.edge_weight is not None and self.edge_weight.numel() != self.num_edges:
            raise ValueError("edge_weight must have one entry per edge")
        for name, edges in self.links.items():
            check_link_edges(edges, n, name)

    @property
    def num_nodes(self) -> int:
        """Vertices in the graph."""
        return self.indptr.numel() - 1

    @property
    def num_edges(self) -> int:
        """Edges (directed, as stored)."""
        return self.indices.numel()

    @property
    def num_features(self) -> int:
        """Feature columns (0 without features)."""
        return 0 if self.x is None else int(self.x.shape[1])

    def in_degree(self) -> torch.Tensor:
        """Number of in-neighbors (sources) of every vertex."""
        return self.indptr[1:] - self.indptr[:-1]

    def out_degree(self) -> torch.Tensor:
        """Number of destinations every vertex feeds (how often it is a source)."""
        return torch.bincount(self.indices.long(), minlength=self.num_nodes)

    def edge_index(self) -> torch.Tensor:
        """COO ``[2, E]`` with row 0 = source, row 1 = destination (PyG's convention)."""
        dst = torch.repeat_interleave(torch.arange(self.num_nodes), self.in_degree())
        return torch.stack([self.indices.long(), dst])

    def mask(self, split: str) -> torch.Tensor:
        """Boolean mask of the ``train``/``val``/``test`` split."""
        idx = getattr(self, f"{split}_idx")
        m = torch.zeros(self.num_nodes, dtype=torch.bool)
        if idx is not None:
            m[idx] = True
        return m

    def summary(self) -> str:
        """One line: name, sizes and splits."""
        parts = [f"{self.name}: {self.num_nodes:,} nodes", f"{self.num_edges:,} edges"]
        if self.x is not None:
            parts.append(f"{self.num_features} features")
        if self.num_classes:
            parts.append(f"{self.num_classes} classes")
        for s in ("train", "val", "test"):
            idx = getattr(self, f"{s}_idx")
            if idx is not None:
                parts.append(f"{s} {idx.numel():,}")
        return ", ".join(parts)

    @classmethod
    def from_edge_index(
        cls,
        edge_index: torch.Tensor | np.ndarray,
        num_nodes: int | None = None,
        *,
        symmetrize: bool = False,
        self_loops: str = "keep",
        dedupe: bool = True,
        edge_weight: torch.Tensor | None = None,
        index_dtype: torch.dtype = torch.int64,
        **fields,
    ) -> GraphStore:
        """Build a CSC graph from a ``[2, E]`` (source, destination) edge list.

        ``symmetrize`` adds every reverse edge; ``self_loops`` is ``keep``, ``remove`` or
        ``add`` (one per vertex); ``dedupe`` keeps one copy of repeated edges (the first
        weight wins). Ids must lie in ``[0, num_nodes)``.
        """
        ei = torch.as_tensor(np.asarray(edge_index) if not torch.is_tensor(edge_index)
                             else edge_index)
        if ei.dim() != 2 or ei.shape[0] != 2:
            raise ValueError(f"edge_index must have shape [2, E], got {tuple(ei.shape)}")
        if ei.is_floating_point() or ei.dtype == torch.bool:
            raise TypeError(f"edge_index must hold integer ids, got {ei.dtype}")
        if self_loops not in SELF_LOOP_MODES:
            raise ValueError(f"self_loops must be one of {SELF_LOOP_MODES}, got {self_loops!r}")
        ei = ei.long()
        if num_nodes is None:
            num_nodes = int(ei.max()) + 1 if ei.numel() else 0
        for name in ("x", "y"):  # before allocating anything of num_nodes' size
            rows = None if fields.get(name) is None else fields[name].shape[0]
            if rows is not None and rows != num_nodes:
                raise ValueError(f"{name} has {rows} rows for {num_nodes} nodes")
        if ei.numel():
            lo, hi = int(ei.min()), int(ei.max())
            if lo < 0 or hi >= num_nodes:
                raise ValueError(
                    f"edge_index holds ids in [{lo}, {hi}] but num_nodes = {num_nodes}: "
                    "ids must lie in [0, num_nodes)"
                )
        w = None if edge_weight is None else torch.as_tensor(edge_weight).float().reshape(-1)
        if w is not None and w.numel() != ei.shape[1]:
            raise ValueError("edge_weight must have one entry per edge")
        src, dst = ei[0], ei[1]
        if symmetrize:
            src, dst = torch.cat([src, dst]), torch.cat([dst, src])
            w = None if w is None else torch.cat([w, w])
        if self_loops in ("remove", "add"):
            keep = src != dst
            src, dst = src[keep], dst[keep]
            w = None if w is None else w[keep]
        if self_loops == "add":
            loop = torch.arange(num_nodes)
            src, dst = torch.cat([src, loop]), torch.cat([dst, loop])
            w = None if w is None else torch.cat([w, torch.ones(num_nodes)])
        key = dst * max(num_nodes, 1) + src
        if dedupe:
            key, first = unique_first(key)
            w = None if w is None else w[first]
            order = None
        else:
            key, order = torch.sort(key, stable=True)
            w = None if w is None else w[order]
        dst = key // max(num_nodes, 1)
        src = key % max(num_nodes, 1)
        indptr = torch.zeros(num_nodes + 1, dtype=torch.int64)
        indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=num_nodes), 0)
        return cls(indptr=indptr, indices=src.to(index_dtype), edge_weight=w, **fields)


def unique_first(key: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sorted unique keys and, for each, the position of its first occurrence."""
    skey, order = torch.sort(key, stable=True)
    if skey.numel() == 0:
        return skey, order
    new = torch.ones_like(skey, dtype=torch.bool)
    new[1:] = skey[1:] != skey[:-1]
    return skey[new], order[new]
