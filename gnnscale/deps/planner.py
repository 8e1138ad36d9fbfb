"""Full-graph dependency planning on an edge-cut: which rows each rank holds at each layer.

Rank ``i`` owns the vertices of its part (its *masters*) and computes their rows at every
layer. Conv ``l`` (layer ``l - 1`` rows in, layer ``l`` rows out) on a vertex reads the vertex
itself and its in-neighbours; a needed layer-``k`` row is either *held* by the rank (a master,
a cached feature row for ``k = 0``, or a replicated row it recomputes for ``k >= 1``) or
*received* from its owner. The manager decides which:

- DepCache (Algorithm 2): every needed row is held: the L-hop in-neighbourhood.
- DepComm (Algorithm 3): only masters are held; every remote row is received.
- Hybrid (Algorithm 4): layer by layer bottom-up, each remote dependency of the masters is
  replicated (with the rows beneath it that are not already there: its subtree) when its
  recomputation cost (Eq. 1, times mu) is below its communication cost (Eq. 2), cheapest
  first, re-measured as the replicated set grows, while the bytes of replicated features, rows
  and edges stay within the budget S (Eq. 3).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch.distributed import ProcessGroup

from gnnscale.data.graph import GraphStore
from gnnscale.deps.base import DependencyManager
from gnnscale.ops.deps import in_edges as native_in_edges
from gnnscale.ops.deps import needed_mask, subtree_costs, subtree_rows

EDGE_BYTES = 16  # one replicated edge: two int64 ids
MAX_ROUNDS = 16  # lazy re-measurement rounds per layer


@dataclass
class EdgeCutLayout:
    """One rank's rows per layer: ``rows[k]`` held (masters first), ``recv[k]`` received."""

    masters: torch.Tensor          # sorted global ids
    rows: list[torch.Tensor]       # k = 0..L: held rows (masters, then replicated, sorted)
    recv: list[torch.Tensor]       # k = 0..L-1: received rows, by owner rank, then id
    recv_counts: list[list[int]]   # k = 0..L-1: rows received from each rank
    report: dict = field(default_factory=dict)


def in_edges(graph: GraphStore, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """In-edges of ``ids``: (global source, position of the destination in ``ids``)."""
    return native_in_edges(graph.indptr, graph.indices, ids)


def _needed(graph: GraphStore, rows: torch.Tensor) -> torch.Tensor:
    """Mask of the rows a conv on destinations ``rows`` reads: themselves and in-neighbours."""
    return needed_mask(graph.indptr, graph.indices, rows)


def replicated_bytes(graph: GraphStore, rep: list[torch.Tensor], dims: list[int]) -> int:
    """Bytes of replicated rows (features for layer 0) and their in-edges (layers >= 1)."""
    deg = graph.in_degree()
    total = 0
    for k, mask in enumerate(rep):
        total += int(mask.sum()) * 4 * dims[k]
        if k >= 1:
            total += int(deg[mask].sum()) * EDGE_BYTES
    return total


def hybrid_replicas(graph: GraphStore, is_master: torch.Tensor, deps: DependencyManager,
                    dims: list[int], lc: torch.Tensor, budget: int | None) -> list[torch.Tensor]:
    """Algorithm 4 bottom-up: per layer ``k = 0..L-1`` the mask of rows replicated.

    Each round measures every pending candidate's subtree natively (cost and bytes, then the
    rows of those taken), and ``deps.plan`` (the native greedy) decides.
    """
    n, L = graph.num_nodes, len(dims) - 1
    comm_c = lc[: L + 1]
    deps_ids = (_needed(graph, is_master.nonzero().flatten()) & ~is_master).nonzero().flatten()
    rep = [torch.zeros(n, dtype=torch.bool) for _ in range(L)]
    comm = [torch.zeros(n, dtype=torch.bool) for _ in range(L)]
    deg, used = graph.in_degree(), 0  # used: replicated_bytes(graph, rep, dims), kept up to date
    for k in range(L):  # dependencies of conv k + 1: layer-k rows of the masters' in-nbrs
        pending = torch.ones(deps_ids.numel(), dtype=torch.bool)
        for _ in range(MAX_ROUNDS):
            idx = pending.nonzero().flatten()
            if idx.numel() == 0:
                break
            # rows available at layers 0..k-1 (held or received) and held at layer k
            ok = [is_master | rep[j] | comm[j] for j in range(k)] + [is_master | rep[k]]
            cand = deps_ids[idx]
            cost, mem = subtree_costs(graph.indptr, graph.indices, cand, ok, dims, lc,
                                      EDGE_BYTES)
            left = None if budget is None else budget - used
            take = deps.plan(cost, comm_c[k].expand(idx.numel()), mem, left)
            if not bool(take.any()):
                break
            for j, rows in enumerate(subtree_rows(graph.indptr, graph.indices, cand, take, ok)):
                new = rows & ~rep[j]
                used += int(new.sum()) * 4 * dims[j]
                used += int(deg[new].sum()) * EDGE_BYTES if j >= 1 else 0
                rep[j] |= new
            pending[idx[take]] = False
        comm[k][deps_ids[pending]] = True
        comm[k] &= ~rep[k]
    return rep


def plan_edge_cut(graph: GraphStore, part: torch.Tensor, rank: int, world: int,
                  deps: DependencyManager, dims: list[int], lc: torch.Tensor | None = None,
                  budget: int | None = None, group: ProcessGroup | None = None
                  ) -> EdgeCutLayout:
    """This rank's rows per layer under ``deps`` (``lc``: :meth:`layer_costs` of ``dims``;
    ``budget``: bytes of replication allowed, by default the manager's).

    The hybrid's plan is then weighed against both fixed plans under the same cost model
    (:func:`guard`: computation, rows sent, and each exchange's fixed cost ``t_sync``, on the
    slowest rank): it runs only when predicted faster than the better fixed plan by more than
    ``deps.margin``, else that fixed plan does: never worse than DepCache (within the budget)
    or DepComm under the model. Collective over ``group`` when distributed."""
    t0 = time.perf_counter()
    budget = deps.budget_bytes() if budget is None else budget
    n, L = graph.num_nodes, len(dims) - 1
    part = part.long()
    is_master = part == rank
    guarded = None
    if deps.replicates_all:
        layout = _layout(graph, part, is_master, None, world, L)
    elif deps.replicates_none or world == 1:
        rep = [torch.zeros(n, dtype=torch.bool) for _ in range(L)]
        layout = _layout(graph, part, is_master, rep, world, L)
    else:
        costs = lc if lc is not None else deps.layer_costs(dims)
        rep = hybrid_replicas(graph, is_master, deps, dims, costs, budget)
        layout = _layout(graph, part, is_master, rep, world, L)
        layout, guarded = guard(graph, part, is_master, world, deps, dims, costs, budget, layout,
                                group)
    layout.report = _report(graph, layout, dims, budget, time.perf_counter() - t0)
    if guarded is not None:
        layout.report["guard"] = guarded
    return layout


def _layout(graph: GraphStore, part: torch.Tensor, is_master: torch.Tensor,
            rep: list[torch.Tensor] | None, world: int, L: int) -> EdgeCutLayout:
    """The rows held and received per layer, top-down, given the replicated rows ``rep``
    (None: every needed row is held)."""
    masters = is_master.nonzero().flatten()
    rows, recv, counts = [masters], [], []  # layers L, L-1, ..., 0: reversed at the end
    for k in range(L - 1, -1, -1):
        need = _needed(graph, rows[-1])
        held = need if rep is None else need & (is_master | rep[k])
        extra = (held & ~is_master).nonzero().flatten()
        rows.append(torch.cat([masters, extra]))
        got = (need & ~held).nonzero().flatten()
        order = torch.argsort(part[got], stable=True)
        recv.append(got[order])
        counts.append(torch.bincount(part[recv[-1]], minlength=world).tolist())
    return EdgeCutLayout(masters, rows[::-1], recv[::-1], counts[::-1])


def layout_cost(graph: GraphStore, lay: EdgeCutLayout, dims: list[int], lc: torch.Tensor,
                mu: float = 1.0) -> float:
    """This rank's seconds per epoch under the cost model: each conv's edges and vertex
    updates (the replicated rows' times ``mu``, Eq. 3) and the rows it receives (forward and
    backward, as :func:`~gnnscale.deps.costs.layer_costs`); without the exchanges' fixed
    cost, which depends on every rank (:func:`guard`)."""
    L, nm = len(dims) - 1, lay.masters.numel()
    comm_c, edge_c, vert_c = lc[: L + 1], lc[L + 1: 2 * L + 2], lc[2 * L + 2:]
    deg = graph.in_degree()
    total = 0.0
    for k in range(L):
        out = lay.rows[k + 1]
        for ids, w in ((out[:nm], 1.0), (out[nm:], mu)):
            total += w * (float(deg[ids].sum()) * float(edge_c[k])
                          + ids.numel() * float(vert_c[k]))
        total += lay.recv[k].numel() * float(comm_c[k])
    return total


def guard(graph: GraphStore, part: torch.Tensor, is_master: torch.Tensor, world: int,
          deps: DependencyManager, dims: list[int], lc: torch.Tensor, budget: int | None,
          hybrid: EdgeCutLayout, group: ProcessGroup | None = None
          ) -> tuple[EdgeCutLayout, dict]:
    """The hybrid's layout, or the better under the cost model of DepCache's (when every
    rank's replication fits ``budget``) and DepComm's; and what it predicted for each.

    A plan's predicted epoch is the slowest rank's :func:`layout_cost` plus, per layer where
    any rank receives rows, two exchanges (forward and backward) of ``t_sync`` seconds each
    (``comm_weight`` applied): the fixed cost the per-row greedy does not see, which can make
    replicating a layer's last few rows, or none, cheaper. The hybrid's own plan is kept only
    when predicted faster than the better fixed plan by more than ``deps.margin`` (a smaller
    predicted gain is within the error of the probed rates, and replicating costs memory);
    otherwise that fixed plan runs. Every rank reaches the same choice (the figures are
    reduced with MAX over ``group``)."""
    import torch.distributed as dist

    from gnnscale.distributed.collectives import all_reduce_host

    n, L = graph.num_nodes, len(dims) - 1
    costs = deps.prepare_costs()
    t_sync = (costs.t_sync if costs is not None else 0.0) * deps.comm_weight
    plans = {"hybrid": hybrid,
             "depcache": _layout(graph, part, is_master, None, world, L),
             "depcomm": _layout(graph, part, is_master,
                                [torch.zeros(n, dtype=torch.bool) for _ in range(L)], world, L)}
    names = list(plans)
    figures = []  # per plan: cost, replicated bytes, rows received per layer
    for name in names:
        lay = plans[name]
        rep_bytes = replicated_bytes(graph, [_mask(n, r[lay.masters.numel():])
                                             for r in lay.rows[:L]], dims)
        figures += [layout_cost(graph, lay, dims, lc, deps.mu), float(rep_bytes)]
        figures += [float(r.numel()) for r in lay.recv]
    agreed = torch.tensor(figures, dtype=torch.float64)
    if dist.is_initialized() and dist.get_world_size(group) > 1:
        all_reduce_host(agreed, op=dist.ReduceOp.MAX, group=group)
    per = agreed.view(len(names), 2 + L)
    predicted = {}
    for i, name in enumerate(names):
        fits = name != "depcache" or budget is None or per[i, 1] <= budget
        exchanges = int((per[i, 2:] > 0).sum())
        if fits:
            predicted[name] = float(per[i, 0]) + 2 * exchanges * t_sync
    fixed = min((k for k in predicted if k != "hybrid"), key=lambda k: predicted[k])
    margin = getattr(deps, "margin", 0.0)
    best = "hybrid" if predicted["hybrid"] < (1 - margin) * predicted[fixed] else fixed
    if margin == 0.0 and predicted["hybrid"] == predicted[fixed]:
        best = "hybrid"  # a tie keeps the hybrid's plan
    return plans[best], {"predicted_s": predicted, "chose": best, "t_sync": t_sync,
                         "margin": margin}


def _mask(n: int, ids: torch.Tensor) -> torch.Tensor:
    m = torch.zeros(n, dtype=torch.bool)
    m[ids] = True
    return m


def _report(graph: GraphStore, lay: EdgeCutLayout, dims: list[int], budget: int | None,
            seconds: float) -> dict:
    """Per layer: dependencies held vs received and their bytes; totals; planning time."""
    nm, L = lay.masters.numel(), len(dims) - 1
    deg = graph.in_degree()
    layers = []
    for k in range(L):
        extra = lay.rows[k][nm:]
        layers.append({
            "layer": k, "replicated": int(extra.numel()), "communicated": int(lay.recv[k].numel()),
            "replicated_bytes": int(extra.numel()) * 4 * dims[k]
            + (int(deg[extra].sum()) * EDGE_BYTES if k >= 1 else 0),
            "received_bytes": int(lay.recv[k].numel()) * 4 * dims[k],
        })
    return {"layers": layers, "plan_seconds": seconds, "budget_bytes": budget,
            "replicated_bytes": sum(x["replicated_bytes"] for x in layers)}
