"""Quality figures of a partition book (their table is the book's own:
:meth:`~gnnscale.partition.book.PartitionBook.report`).

An edge is *local* when its part owns (is the master of) both endpoints; the edge-cut fraction
is the rest. The replication factor is the mean number of parts holding a copy of a vertex
(master plus mirrors). Balances are max / mean over parts of owned vertices, edges and training
vertices. Two parts are communication partners when either holds a mirror of a vertex the other
owns. On a graph with several node types the balance of each type's owned vertices is reported
too (``balance_per_type``, its worst ``balance_types_max``, and per part ``vertices_per_type``);
an untyped graph's figures carry none of these keys.
"""

from __future__ import annotations

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.partition._graph import edge_dst, edge_src, type_offsets
from gnnscale.partition.book import PartitionBook


def balance(counts: torch.Tensor) -> float | None:
    """max / mean of per-part counts (1.0 = perfect); None when everything is zero."""
    counts = counts.double()
    mean = float(counts.mean())
    return None if mean == 0 else float(counts.max()) / mean


def partner_matrix(book: PartitionBook) -> torch.Tensor:
    """Symmetric ``[P, P]`` bool matrix: parts that exchange mirror data."""
    p = book.num_parts
    holder = torch.repeat_interleave(torch.arange(p), torch.diff(book.mirror_ptr))
    owner = book.part[book.mirror_ids]
    m = torch.zeros(p * p, dtype=torch.bool)
    m[holder * p + owner] = True
    m = m.view(p, p)
    m = m | m.T
    m.fill_diagonal_(False)
    return m


def evaluate(graph: GraphStore, book: PartitionBook, time_s: float | None = None) -> dict:
    """All quality figures of ``book`` on ``graph`` (per-part lists included)."""
    p, n = book.num_parts, graph.num_nodes
    src, dst = edge_src(graph), edge_dst(graph)
    eown = book.edge_owner(graph)
    local = (book.part[src] == eown) & (book.part[dst] == eown)
    e = max(graph.num_edges, 1)
    local_ratio = float(local.sum()) / e if graph.num_edges else 1.0
    verts = torch.bincount(book.part, minlength=p)
    edges = torch.bincount(eown, minlength=p)
    train = None
    if graph.train_idx is not None and graph.train_idx.numel():
        train = torch.bincount(book.part[graph.train_idx.long()], minlength=p)
    partners = partner_matrix(book).sum(1)
    mirrors = torch.diff(book.mirror_ptr)
    q = {
        "kind": book.kind,
        "num_parts": p,
        "num_nodes": n,
        "num_edges": graph.num_edges,
        "local_edge_ratio": local_ratio,
        "edge_cut_fraction": 1.0 - local_ratio,
        "replication_factor": (n + int(mirrors.sum())) / max(n, 1),
        "balance_vertices": balance(verts),
        "balance_edges": balance(edges),
        "balance_train": None if train is None else balance(train),
        "partners_max": int(partners.max()),
        "partners_mean": float(partners.double().mean()),
        "time_s": time_s,
        "per_part": {
            "vertices": verts.tolist(),
            "edges": edges.tolist(),
            "train": None if train is None else train.tolist(),
            "mirrors": mirrors.tolist(),
            "partners": partners.tolist(),
        },
    }
    if len(graph.node_types) > 1:
        q.update(type_balance(graph, book))
    return q


def type_balance(graph: GraphStore, book: PartitionBook) -> dict:
    """Per node type: the balance (max / mean over parts) of the vertices each part owns."""
    off = type_offsets(graph).tolist()
    per_type, per_part = {}, {}
    for i, t in enumerate(graph.node_types):
        counts = torch.bincount(book.part[off[i]:off[i + 1]], minlength=book.num_parts)
        per_type[t], per_part[t] = balance(counts), counts.tolist()
    worst = [b for b in per_type.values() if b is not None]
    return {"balance_per_type": per_type, "balance_types_max": max(worst) if worst else None,
            "vertices_per_type": per_part}
