"""Graph helpers shared by the partitioners: edge endpoints, undirected CSR, contiguous ranges,
and the node types every partitioner balances separately (a graph's node types are contiguous
id ranges; an untyped graph is the one-type case, where every helper reduces to the whole id
range)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from gnnscale.data.graph import GraphStore


def edge_dst(graph: GraphStore) -> torch.Tensor:
    """Destination of every edge in CSC order (int64)."""
    return torch.repeat_interleave(torch.arange(graph.num_nodes), graph.in_degree())


def edge_src(graph: GraphStore) -> torch.Tensor:
    """Source of every edge in CSC order (int64)."""
    return graph.indices.long()


def undirected_csr(graph: GraphStore) -> tuple[np.ndarray, np.ndarray]:
    """Symmetrised adjacency without self loops or duplicates as int64 ``(xadj, adjncy)``.

    Isolated vertices simply get an empty row.
    """
    n = graph.num_nodes
    src = graph.indices.numpy()
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.indptr.numpy()))
    keep = src != dst
    src, dst = src[keep], dst[keep]
    del keep
    a = sp.csr_matrix((np.ones(src.size, dtype=np.int8), (dst, src)), shape=(n, n))
    del src, dst
    a = (a + a.T).tocsr()
    a.sort_indices()
    return a.indptr.astype(np.int64), a.indices.astype(np.int64)


def contiguous_ranges(weights: np.ndarray, num_parts: int) -> np.ndarray:
    """Split ``range(len(weights))`` into ``num_parts`` non-empty runs of similar total weight.

    Returns the vertex -> part array (part ids ascend with vertex ids).
    """
    n = weights.size
    if n and not weights.sum() > 0:
        weights = np.ones(n)
    csum = np.cumsum(weights, dtype=np.float64)
    total = csum[-1] if n else 0.0
    targets = total * np.arange(1, num_parts) / num_parts
    bounds = np.searchsorted(csum, targets, side="left") + 1  # first vertex of parts 1..p-1
    bounds = np.concatenate([[0], bounds, [n]]).astype(np.int64)
    for k in range(1, num_parts):  # every part non-empty, in order
        bounds[k] = min(max(bounds[k], bounds[k - 1] + 1), n - (num_parts - k))
    sizes = np.diff(bounds)
    return np.repeat(np.arange(num_parts, dtype=np.int64), sizes)


def type_offsets(graph: GraphStore) -> np.ndarray:
    """``[T + 1]`` int64 bounds of the node types' id ranges (``[0, N]`` with one type)."""
    return graph.node_type_offset.numpy().astype(np.int64)


def node_type_index(graph: GraphStore) -> np.ndarray | None:
    """The node type (an index into ``graph.node_types``) of every vertex as int64, or None
    on a graph with one node type (nothing to balance per type)."""
    off = type_offsets(graph)
    if off.size <= 2:
        return None
    return np.repeat(np.arange(off.size - 1, dtype=np.int64), np.diff(off))


def ranges_per_type(weights: np.ndarray, num_parts: int, offsets: np.ndarray) -> np.ndarray:
    """:func:`contiguous_ranges` within each node type's id range: every part owns one
    contiguous slice of every type, and each type's slices carry similar total weight. A type
    with fewer vertices than parts deals them out one per part, continuing from the previous
    types' position so the totals stay even. With one type this is :func:`contiguous_ranges`."""
    if offsets.size <= 2:
        return contiguous_ranges(weights, num_parts)
    part = np.empty(weights.size, dtype=np.int64)
    for lo, hi in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        if hi - lo >= num_parts:
            part[lo:hi] = contiguous_ranges(weights[lo:hi], num_parts)
        else:
            part[lo:hi] = np.arange(lo, hi) % num_parts
    return part


def check_num_parts(graph: GraphStore, num_parts: int) -> None:
    """Clear errors for a part count that cannot be served."""
    if not isinstance(num_parts, int | np.integer) or num_parts < 1:
        raise ValueError(f"num_parts must be a positive integer, got {num_parts!r}")
    if num_parts > graph.num_nodes:
        raise ValueError(
            f"num_parts={num_parts} exceeds the {graph.num_nodes} vertices of {graph.name!r}: "
            "every part needs at least one vertex, use fewer parts"
        )


def blocked_masters(graph: GraphStore, num_parts: int) -> torch.Tensor:
    """CuSP's master assignment: contiguous id blocks balancing vertices and (in + out) edges,
    cut per node type on a typed graph (each type's range in ``num_parts`` blocks)."""
    deg = (graph.in_degree() + graph.out_degree()).numpy().astype(np.float64)
    mean = deg.mean() if deg.size else 0.0
    return torch.from_numpy(ranges_per_type(deg + max(mean, 1.0), num_parts, type_offsets(graph)))
