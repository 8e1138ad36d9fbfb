"""Edge-cut full-graph plans on real gloo ranks against one process on the whole graph."""

from __future__ import annotations

import pytest
import torch

from gnnscale.deps.base import greedy
from gnnscale.deps.depcache import DepCache
from gnnscale.deps.depcomm import DepComm
from gnnscale.deps.hybrid import Hybrid
from gnnscale.deps.planner import in_edges, plan_edge_cut
from gnnscale.distributed import spawn
from gnnscale.partition.metis import MetisPartitioner
from gnnscale.partition.random import RandomPartitioner
from tests import _fullgraph_fns as F

FORCED = ("depcache", "depcomm", "hybrid_replicate", "hybrid_communicate", "hybrid_capped")
CASES = [(m, d, {}) for m in F.MODELS for d in FORCED] + [
    ("sage", "hybrid", {}),  # probed costs
    ("sage", "hybrid_capped", {"ring": True}),
    ("gat", "hybrid_capped", {"overlap": True}),
    ("gcn", "depcomm", {"overlap": True, "ring": True}),
    ("gcn_res", "depcomm", {}), ("gcn_res", "depcache", {}), ("sage_res", "hybrid_capped", {}),
] + [  # overlap: by source group (splittable), by destination (GAT), forward and backward
    (m, d, {"overlap": True}) for m in F.MODELS
    for d in ("depcomm", "hybrid_capped", "hybrid_communicate")] + [
    ("gcn", "depcache", {"overlap": True}), ("gcn_res", "depcomm", {"overlap": True}),
    ("sage_res", "hybrid_capped", {"overlap": True, "ring": True}),
    ("sage", "depcomm", {"overlap": True, "hide": False}),  # nothing hidden: same results
]


def _close(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.allclose(x, y, atol=1e-5, rtol=1e-4) for x, y in zip(a, b, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("world,partitioner", [(2, "metis"), (2, "random"), (4, "metis"),
                                               (4, "random")])
def test_edge_cut_plans_match_single_process(world, partitioner):
    graph = F.make_graph()
    parter = MetisPartitioner() if partitioner == "metis" else RandomPartitioner(seed=1)
    part = parter.partition(graph, world).part
    ranks = spawn(F.edge_cut_cases, world, part, CASES, timeout_s=240.0)
    refs = {m: F.reference(m) for m in {c[0] for c in CASES}}
    n, e, L = graph.num_nodes, graph.num_edges, F.LAYERS
    for i, (model, deps, opts) in enumerate(CASES):
        ref, res = refs[model], [r[i] for r in ranks]
        for r in res:
            assert r["loss"] == pytest.approx(ref["loss"], rel=1e-5), (model, deps, opts)
            assert _close(r["grads"], ref["grads"]), (model, deps, opts, "grads")
            assert _close(r["params"], ref["params"]), (model, deps, opts, "params")
        stats = [r["stats"] for r in res]
        if deps == "depcomm":  # every (vertex, layer) and every edge exactly once
            assert sum(s["edges_computed"] for s in stats) == e * L
            assert sum(s["vertex_updates"] for s in stats) == n * L
            assert all(s["replicated_rows"] == 0 for s in stats)
        if deps in ("depcache", "hybrid_replicate"):  # nothing sent but the all-reduce
            assert all(s["bytes_forward"] == s["bytes_backward"] == 0 for s in stats)
            assert sum(s["replicated_rows"] for s in stats) > 0
        if opts.get("overlap"):  # the same rows move as without overlap
            plain = CASES.index((model, deps, {}))
            for r, o in zip(ranks, res):
                for key in ("bytes_forward", "bytes_backward", "edges_computed"):
                    assert o["stats"][key] == r[plain]["stats"][key], (model, deps, key)
        if deps == "hybrid_capped":  # a mix, within the 1.5 KiB budget
            assert all(0 < s["replicated_bytes"] <= 1536 for s in stats)
            assert sum(s["bytes_forward"] for s in stats) > 0


def test_greedy_takes_cheapest_first_within_budget():
    t_r = torch.tensor([3.0, 1.0, 2.0, 9.0])
    assert greedy(t_r, torch.tensor(5.0), None, None).tolist() == [True, True, True, False]
    mem = torch.tensor([10.0, 10.0, 10.0, 10.0])
    assert greedy(t_r, torch.tensor(5.0), mem, 25).tolist() == [False, True, True, False]
    assert greedy(t_r, torch.tensor(5.0), mem, 25, mu=0.5).tolist() == [False, True, True, False]
    assert greedy(t_r, torch.tensor(1.0), mem, 100).tolist() == [False, False, False, False]


def _hops(graph, ids: torch.Tensor, hops: int) -> set[int]:
    seen = set(ids.tolist())
    frontier = ids
    for _ in range(hops):
        src = in_edges(graph, frontier)[0]
        frontier = torch.tensor(sorted(set(src.tolist()) - seen), dtype=torch.int64)
        seen |= set(frontier.tolist())
    return seen


def test_planner_layouts():
    graph = F.make_graph()
    part = torch.arange(graph.num_nodes) % 3
    dims = [6, 8, 8, 3]
    masters = (part == 1).nonzero().flatten()
    cache = plan_edge_cut(graph, part, 1, 3, DepCache(), dims)
    for k in range(3):  # DepCache holds the (L - k)-hop in-neighbourhood, receives nothing
        assert set(cache.rows[k].tolist()) == _hops(graph, masters, 3 - k)
        assert cache.recv[k].numel() == 0
    comm = plan_edge_cut(graph, part, 1, 3, DepComm(), dims)
    for k in range(3):  # DepComm holds only masters and receives every remote in-neighbour
        assert torch.equal(comm.rows[k], masters)
        assert set(comm.recv[k].tolist()) == _hops(graph, masters, 1) - set(masters.tolist())
        assert comm.recv_counts[k][1] == 0
    costs = {"t_vertex": 0.0, "t_edge": 0.0, "t_comm": 1.0}
    capped = plan_edge_cut(graph, part, 1, 3, Hybrid(costs=costs, memory_cap_mb=1 / 1024,
                                                      margin=0.0), dims)
    assert 0 < capped.report["replicated_bytes"] <= 1024
    assert capped.report["plan_seconds"] >= 0


@pytest.mark.parametrize("reach", [3, 40])  # a peer reaching few destinations, and most
def test_group_sum_over_the_rows_it_reaches_equals_the_dense_sum(reach):
    """A source group's partial sum, whether compact (only the destination rows its edges
    reach) or over every row, equals the dense product, alone and added into an aggregate;
    its gradient too."""
    from gnnscale.strategies.fullgraph.overlap import GroupSum

    g = torch.Generator().manual_seed(reach)
    num_dst, size, edges = 50, 30, 120
    dst = torch.randint(0, reach, (edges,), generator=g).sort().values
    col = torch.randint(0, size, (edges,), generator=g)
    w = torch.rand(edges, generator=g)
    dense = torch.zeros(num_dst, size).index_put_((dst, col), w, accumulate=True)
    gs = GroupSum.build(col, dst, w, size, num_dst, torch.float32)
    assert (gs.rows is not None) == (reach <= GroupSum.COMPACT * num_dst)
    x = torch.rand(size, 4, generator=g, requires_grad=True)
    base = torch.rand(num_dst, 4, generator=g)
    torch.testing.assert_close(gs.first(x), dense @ x)
    got = gs.add_to(base.clone(), x)
    torch.testing.assert_close(got, base + dense @ x)
    got.sum().backward()
    torch.testing.assert_close(x.grad, dense.sum(0)[:, None].expand(size, 4))


def _predicted(graph, lay, dims, lc, t_sync, mu=1.0) -> float:
    """A layout's cost on one rank (a plan without a group): computation and rows received,
    plus two exchanges of ``t_sync`` per layer that receives rows."""
    from gnnscale.deps.planner import layout_cost

    return layout_cost(graph, lay, dims, lc, mu) + 2 * t_sync * sum(
        r.numel() > 0 for r in lay.recv)


def test_hybrid_guard_keeps_a_fixed_plan_when_exchanges_cost_more():
    """Rows cheap to send one by one, but each exchange's fixed cost (``t_sync``) above the
    whole recomputation: the per-row greedy communicates, the guard replicates every layer
    as DepCache (within the budget), or, when DepCache does not fit, keeps a plan no worse
    than DepComm."""
    graph = F.make_graph()
    part = torch.arange(graph.num_nodes) % 3
    dims = [6, 8, 8, 3]
    costs = {"t_vertex": 1e-9, "t_edge": 1e-9, "t_comm": 1e-12, "t_sync": 1.0}
    lay = plan_edge_cut(graph, part, 1, 3, Hybrid(costs=costs), dims)
    assert lay.report["guard"]["chose"] == "depcache"
    assert all(r.numel() == 0 for r in lay.recv)
    cache = plan_edge_cut(graph, part, 1, 3, DepCache(), dims)
    assert all(torch.equal(a, b) for a, b in zip(lay.rows, cache.rows))
    capped = plan_edge_cut(graph, part, 1, 3, Hybrid(costs=costs, memory_cap_mb=1.5 / 1024),
                           dims)
    assert capped.report["guard"]["chose"] != "depcache"
    assert capped.report["replicated_bytes"] <= 1536


def test_hybrid_guard_never_predicts_worse_than_a_fixed_plan():
    """Under random costs (``t_sync`` 0 in half the draws), budgets and ``mu``, the kept
    plan's predicted cost is at most DepComm's and, when it fits the budget, DepCache's (the
    greedy alone loses to DepCache in draws 7 and 8)."""
    graph = F.make_graph()
    dims = [6, 16, 8, 3]
    for seed in range(10):
        g = torch.Generator().manual_seed(seed)
        part = torch.randint(0, 3, (graph.num_nodes,), generator=g)
        r = torch.rand(6, generator=g).tolist()
        t_sync = 0.0 if seed % 2 else r[3] * 1e-4
        costs = {"t_vertex": r[0] * 1e-9, "t_edge": r[1] * 1e-8,
                 "t_comm": r[2] * 10 ** (-6 - 3 * r[5]), "t_sync": t_sync}
        hybrid = Hybrid(costs=costs, memory_cap_mb=(0.5 + 63 * r[4]) / 1024,
                        mu=0.5 + 0.5 * r[4])
        lc = hybrid.layer_costs(dims)
        lay = plan_edge_cut(graph, part, 1, 3, hybrid, dims)
        got = _predicted(graph, lay, dims, lc, t_sync, hybrid.mu)
        comm = plan_edge_cut(graph, part, 1, 3, DepComm(), dims)
        assert got <= _predicted(graph, comm, dims, lc, t_sync, hybrid.mu) * (1 + 1e-9), seed
        cache = plan_edge_cut(graph, part, 1, 3, DepCache(), dims)
        if cache.report["replicated_bytes"] <= hybrid.budget_bytes():
            assert got <= _predicted(graph, cache, dims, lc, t_sync, hybrid.mu) * (
                1 + 1e-9), seed
        assert lay.report["replicated_bytes"] <= hybrid.budget_bytes(), seed


def test_hybrid_guard_keeps_its_own_plan_only_beyond_the_margin():
    """The greedy's plan runs only when predicted faster than the better fixed plan by more
    than ``deps.margin``; a smaller predicted gain runs that fixed plan."""
    graph = F.make_graph()
    part = torch.arange(graph.num_nodes) % 3
    dims = [6, 8, 8, 3]
    costs = {"t_vertex": 0.0, "t_edge": 0.0, "t_comm": 1.0}
    kept = plan_edge_cut(graph, part, 1, 3, Hybrid(costs=costs, memory_cap_mb=1 / 1024,
                                                   margin=0.0), dims)
    guard = kept.report["guard"]
    assert guard["chose"] == "hybrid" and "depcache" not in guard["predicted_s"]  # over budget
    gain = 1 - guard["predicted_s"]["hybrid"] / guard["predicted_s"]["depcomm"]
    assert 0 < gain < 1
    above = plan_edge_cut(graph, part, 1, 3, Hybrid(costs=costs, memory_cap_mb=1 / 1024,
                                                    margin=gain * 0.9), dims)
    assert above.report["guard"]["chose"] == "hybrid"
    below = plan_edge_cut(graph, part, 1, 3, Hybrid(costs=costs, memory_cap_mb=1 / 1024,
                                                    margin=min(gain * 1.1, 0.99)), dims)
    assert below.report["guard"]["chose"] == "depcomm"
    assert below.report["replicated_bytes"] == 0 and all(
        torch.equal(r, below.masters) for r in below.rows)
