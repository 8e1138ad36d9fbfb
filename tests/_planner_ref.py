"""The pure-torch hybrid planner that the native one (``csrc/deps/``) replaced, kept as the
reference the native results must equal exactly (tests/ops/test_planner_native.py)."""

from __future__ import annotations

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.deps.planner import EDGE_BYTES, MAX_ROUNDS, replicated_bytes


def in_edges(graph: GraphStore, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """In-edges of ``ids``: (global source, position of the destination in ``ids``)."""
    ids = ids.long()
    start = graph.indptr[ids]
    deg = graph.indptr[ids + 1] - start
    pos = torch.repeat_interleave(torch.arange(ids.numel()), deg)
    first = torch.cumsum(deg, 0) - deg
    offset = torch.arange(pos.numel()) - first[pos]
    return graph.indices[start[pos] + offset].long(), pos


def greedy(recompute_cost, comm_cost, mem_bytes, budget, mu: float = 1.0) -> torch.Tensor:
    """Algorithm 4, lines 8-15, vectorised (the former gnnscale.deps.base.greedy)."""
    t_r = torch.as_tensor(recompute_cost, dtype=torch.float64)
    t_c = torch.as_tensor(comm_cost, dtype=torch.float64).expand_as(t_r)
    take = mu * t_r < t_c
    if budget is None or mem_bytes is None or not bool(take.any()):
        return take
    order = torch.argsort(t_r, stable=True)
    order = order[take[order]]
    mem = torch.as_tensor(mem_bytes, dtype=torch.float64)[order]
    fits = torch.cumsum(mem, 0) <= budget
    mask = torch.zeros_like(take)
    stop = int(fits.logical_not().nonzero()[0]) if not bool(fits.all()) else fits.numel()
    mask[order[:stop]] = True
    return mask


def subtree(graph: GraphStore, cand: torch.Tensor, k: int, held: list[torch.Tensor],
            avail: list[torch.Tensor], dims: list[int], lc: torch.Tensor):
    """Per candidate: cost (Eq. 1), bytes and rows (layer, candidate, vertex) of its subtree."""
    n, L = graph.num_nodes, len(dims) - 1
    edge_c, vert_c = lc[L + 1: 2 * L + 2], lc[2 * L + 2:]
    deg = graph.in_degree()
    cost = torch.zeros(cand.numel(), dtype=torch.float64)
    mem = torch.zeros(cand.numel(), dtype=torch.float64)
    ci, v = torch.arange(cand.numel()), cand
    new_rows = []
    for j in range(k, -1, -1):
        ok = held[j] if j == k else avail[j]
        new = ~ok[v]
        ci, v = ci[new], v[new]
        new_rows.append((j, ci, v))
        row_mem = torch.full((v.numel(),), 4.0 * dims[j], dtype=torch.float64)
        if j >= 1:
            d = deg[v].double()
            row_mem += EDGE_BYTES * d
            cost.index_add_(0, ci, vert_c[j - 1] + d * edge_c[j - 1])
            src, pos = in_edges(graph, v)
            key = torch.unique(torch.cat([ci[pos] * n + src, ci * n + v]))
            ci, v = key // n, key % n
        mem.index_add_(0, ci if j == 0 else new_rows[-1][1], row_mem)
    return cost, mem, new_rows


def hybrid_replicas(graph: GraphStore, is_master: torch.Tensor, mu: float, dims: list[int],
                    lc: torch.Tensor, budget: int | None) -> list[torch.Tensor]:
    """Algorithm 4 bottom-up with the reference greedy: per layer the mask of rows replicated."""
    n, L = graph.num_nodes, len(dims) - 1
    comm_c = lc[: L + 1]
    src = in_edges(graph, is_master.nonzero().flatten())[0]
    deps_ids = torch.unique(src[~is_master[src]])
    rep = [torch.zeros(n, dtype=torch.bool) for _ in range(L)]
    comm = [torch.zeros(n, dtype=torch.bool) for _ in range(L)]
    for k in range(L):
        pending = torch.ones(deps_ids.numel(), dtype=torch.bool)
        for _ in range(MAX_ROUNDS):
            idx = pending.nonzero().flatten()
            if idx.numel() == 0:
                break
            held = [is_master | r for r in rep]
            avail = [h | c for h, c in zip(held, comm)]
            cost, mem, new_rows = subtree(graph, deps_ids[idx], k, held, avail, dims, lc)
            left = None if budget is None else budget - replicated_bytes(graph, rep, dims)
            take = greedy(cost, comm_c[k].expand(idx.numel()), mem, left, mu)
            if not bool(take.any()):
                break
            for j, ci, v in new_rows:
                rep[j][v[take[ci]]] = True
            pending[idx[take]] = False
        comm[k][deps_ids[pending]] = True
        comm[k] &= ~rep[k]
    return rep
