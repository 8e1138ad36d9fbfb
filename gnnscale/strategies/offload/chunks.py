"""HongTu's 2-level partitioning (section 4.1) and subgraph reorganisation (Algorithm 4).

Level 1 is an edge-cut partition book, one part per rank. Level 2 cuts each part's masters
into ``chunks`` chunks of balanced in-edges: ``level2=range`` as contiguous id ranges (HongTu's
choice, which relies on ids that carry locality, as real graphs' crawl orders do), or
``level2=metis`` by METIS on the part's induced subgraph (locality from the edges themselves,
whatever the ids). A chunk is its destinations with all their in-edges, so a conv on a chunk
is a full-neighbour aggregation.
Batch ``b`` runs chunk ``assign[p][b]`` of every part ``p`` at once, batches in ``order``.
A part's chunks and load sets depend on its own masters' in-edges only, so a rank that holds
only its part (``parts=``) chunks that part and gathers the others' from their ranks
(``gather``): the same chunking as planned from the whole graph.

Without reorganisation ``assign[p][b] = b`` and ``order = 0..C-1``. With it, phase 1 gives each
batch, part after part, the chunk sharing the most neighbours with the batch's transition set
so far (inter-rank duplicates), and phase 2 orders the batches greedily so that consecutive
ones share the most transition vertices (intra-rank reuse).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.deps.planner import in_edges
from gnnscale.strategies.offload.config import LEVEL2


@dataclass
class Chunking:
    """Chunks of every part and their schedule."""

    dst: list[list[torch.Tensor]]   # dst[p][c]: destinations of chunk c of part p (sorted ids)
    load: list[list[torch.Tensor]]  # load[p][c]: rows a conv on it reads, destinations first
    assign: list[list[int]]         # assign[p][b]: chunk of part p in batch b
    order: list[int]                # batches in the order they run

    @property
    def num_chunks(self) -> int:
        """Chunks per part."""
        return len(self.order)

    def batch(self, p: int, step: int) -> int:
        """Chunk of part ``p`` run at the ``step``-th batch of a pass."""
        return self.assign[p][self.order[step]]

    def replication(self, num_nodes: int) -> float:
        """HongTu's neighbour replication factor alpha: loaded rows over |V| (Table 3)."""
        return sum(x.numel() for part in self.load for x in part) / max(num_nodes, 1)


def _check_chunks(chunks: int, n: int) -> None:
    if chunks > n:
        raise ValueError(f"strategy.chunks={chunks} is more than the {n} vertices of a part: "
                         f"use strategy.chunks <= {n}")


def split_part(graph: GraphStore, masters: torch.Tensor, chunks: int) -> list[torch.Tensor]:
    """``masters`` (sorted) cut into ``chunks`` non-empty ranges of balanced in-edges."""
    n = masters.numel()
    _check_chunks(chunks, n)
    weight = (graph.indptr[masters + 1] - graph.indptr[masters]).double() + 1.0
    cum = torch.cumsum(weight, 0)
    targets = cum[-1] * torch.arange(1, chunks, dtype=torch.float64) / chunks
    cuts = torch.searchsorted(cum, targets, right=True).tolist()
    bounds = [0]
    for i, c in enumerate(cuts):  # every chunk keeps at least one vertex
        bounds.append(min(max(c, bounds[-1] + 1), n - (chunks - 1 - i)))
    bounds.append(n)
    return [masters[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def metis_part(graph: GraphStore, masters: torch.Tensor, chunks: int, seed: int = 0
               ) -> list[torch.Tensor]:
    """``masters`` (sorted) cut by METIS on their induced subgraph into ``chunks`` non-empty
    chunks (each sorted) balanced by in-edges + 1 (the edges a chunk aggregates)."""
    from gnnscale.partition.metis import MetisPartitioner

    n = masters.numel()
    _check_chunks(chunks, n)
    if chunks == 1:
        return [masters]
    if n == graph.num_nodes:  # one part: the graph itself
        sub = graph
    else:
        local = torch.full((graph.num_nodes,), -1, dtype=torch.int64)
        local[masters] = torch.arange(n)
        src, pos = in_edges(graph, masters)  # pos: the destination's index in masters
        keep = local[src] >= 0
        sub = GraphStore.from_edge_index(torch.stack([local[src[keep]], pos[keep]]), n)
        del local, src, pos, keep
    # the whole graph's in-degree + 1, not the induced subgraph's: what a chunk aggregates
    weight = (graph.indptr[masters + 1] - graph.indptr[masters] + 1).numpy().astype("int64")
    metis = MetisPartitioner(seed=seed, imbalance=1.03, rebalance=False,  # pymetis' default:
                             method="recursive" if chunks <= 8 else "kway")  # bisect to 8
    assign = metis.assign(sub, chunks, weights=weight)
    counts = torch.bincount(assign, minlength=chunks)
    for c in (counts == 0).nonzero().flatten().tolist():  # METIS may leave a part empty
        big = int(counts.argmax())
        assign[(assign == big).nonzero()[-1]] = c
        counts[big] -= 1
        counts[c] += 1
    order = torch.argsort(assign * n + torch.arange(n))  # by chunk, then id
    return list(torch.split(masters[order], counts.tolist()))


def load_set(graph: GraphStore, dst: torch.Tensor) -> torch.Tensor:
    """The destinations, then their other in-neighbours (sorted): what the conv reads."""
    src, _ = in_edges(graph, dst)
    is_dst = torch.zeros(graph.num_nodes, dtype=torch.bool)
    is_dst[dst] = True
    read = torch.zeros(graph.num_nodes, dtype=torch.bool)
    read[src] = True
    return torch.cat([dst, (read & ~is_dst).nonzero().flatten()])


#: ``gather(mine)`` -> every rank's ``mine``, in rank order (a collective over the ranks)
Gather = Callable[[tuple[list[torch.Tensor], list[torch.Tensor]]],
                  list[tuple[list[torch.Tensor], list[torch.Tensor]]]]


def two_level(graph: GraphStore, part: torch.Tensor, world: int, chunks: int,
              reorganize: bool = False, level2: str = "range", rank: int = 0,
              gather: Gather | None = None) -> Chunking:
    """Chunk every part of ``part`` (one per rank) by ``level2`` (:data:`LEVEL2`) and schedule
    the chunks into batches. With ``gather`` (``graph`` holding the in-edges of part ``rank``
    only) this rank chunks its own part and ``gather`` brings every part's chunks."""
    if level2 not in LEVEL2:
        raise ValueError(f"strategy.level2 must be one of {', '.join(LEVEL2)}, got {level2!r}")

    def chunked(p: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        masters = (part == p).nonzero().flatten()
        cs = (split_part if level2 == "range" else metis_part)(graph, masters, chunks)
        return cs, [load_set(graph, c) for c in cs]

    every = gather(chunked(rank)) if gather is not None else [chunked(p) for p in range(world)]
    dst, load = [cs for cs, _ in every], [ls for _, ls in every]
    assign = [list(range(chunks)) for _ in range(world)]
    order = list(range(chunks))
    if reorganize and chunks > 1:
        assign = _group_batches(load, graph.num_nodes)
        order = _order_batches(load, assign, graph.num_nodes)
    return Chunking(dst, load, assign, order)


def _group_batches(load: list[list[torch.Tensor]], n: int) -> list[list[int]]:
    """Phase 1: batch b starts with chunk b of part 0; every other part in turn gives each
    batch (in batch order) its free chunk with the most neighbours in the batch's set."""
    chunks = len(load[0])
    trans = torch.zeros(chunks, n, dtype=torch.bool)
    for b in range(chunks):
        trans[b, load[0][b]] = True
    assign = [list(range(chunks))]
    for p in range(1, len(load)):
        shared = torch.stack([trans[:, ids].sum(1) for ids in load[p]], dim=1)  # [batch, chunk]
        free = torch.ones(chunks, dtype=torch.bool)
        mine = []
        for b in range(chunks):
            c = int(torch.where(free, shared[b], torch.tensor(-1)).argmax())
            free[c] = False
            mine.append(c)
            trans[b, load[p][c]] = True
        assign.append(mine)
    return assign


def _order_batches(load: list[list[torch.Tensor]], assign: list[list[int]], n: int
                   ) -> list[int]:
    """Phase 2: from batch 0, always run next the batch sharing the most transition vertices
    with the current one (each owner reuses the rows both batches need)."""
    chunks = len(assign[0])
    trans = torch.zeros(chunks, n, dtype=torch.float32)
    for b in range(chunks):
        for p in range(len(load)):
            trans[b, load[p][assign[p][b]]] = 1.0
    shared = trans @ trans.T
    order, left = [0], set(range(1, chunks))
    while left:
        cur = order[-1]
        nxt = max(left, key=lambda b: (float(shared[cur, b]), -b))
        order.append(nxt)
        left.remove(nxt)
    return order
