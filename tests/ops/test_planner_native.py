"""The native hybrid planner (csrc/deps/) against the pure-torch reference it replaced: the
greedy step, the per-candidate subtrees and the whole bottom-up plan must be identical."""

from __future__ import annotations

import pytest
import torch

from gnnscale.data.graph import GraphStore
from gnnscale.deps.base import greedy
from gnnscale.deps.hybrid import Hybrid
from gnnscale.deps.planner import EDGE_BYTES, hybrid_replicas, in_edges
from gnnscale.ops.deps import needed_mask, subtree_costs, subtree_rows
from tests import _planner_ref as ref


def _graph(n: int, e: int, seed: int, index_dtype=torch.int64) -> GraphStore:
    g = torch.Generator().manual_seed(seed)
    hubs = torch.randint(0, max(1, n // 8), (e // 3,), generator=g)  # skewed degrees
    src = torch.cat([torch.randint(0, n, (e - e // 3,), generator=g), hubs])
    dst = torch.randint(0, n, (e,), generator=g)
    return GraphStore.from_edge_index(torch.stack([src, dst]), n, index_dtype=index_dtype)


@pytest.mark.parametrize("seed", range(30))
def test_greedy_matches_reference(seed):
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(0, 40, (1,), generator=g))
    t_r = torch.randint(0, 6, (n,), generator=g).double() / 2  # many ties
    comm = torch.tensor(2.0) if seed % 2 else torch.randint(0, 6, (n,), generator=g).double()
    mem = torch.randint(1, 10, (n,), generator=g).double()
    total = float(mem.sum())
    for mu in (1.0, 0.5, 0.3):
        for budget in (None, 0, 3, total / 3, total / 2, total):
            for m in (mem, None):
                want = ref.greedy(t_r, comm, m, budget, mu)
                got = greedy(t_r, comm, m, budget, mu)
                assert got.dtype == torch.bool and torch.equal(got, want), (mu, budget)


def test_greedy_never_takes_nan_and_checks_lengths():
    t_r = torch.tensor([float("nan"), 1.0, 0.5])
    assert greedy(t_r, 2.0, torch.ones(3), 10).tolist() == [False, True, True]
    with pytest.raises(RuntimeError, match="comm_cost needs one value or one per candidate"):
        greedy(t_r, torch.ones(2), None, None)
    with pytest.raises(RuntimeError, match="mem_bytes needs one value per candidate"):
        greedy(t_r, 2.0, torch.ones(2), 10)


def _masks(n: int, layers: int, g: torch.Generator, density: float) -> list[torch.Tensor]:
    return [torch.rand(n, generator=g) < density for _ in range(layers)]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_subtrees_match_reference(seed, index_dtype):
    g = torch.Generator().manual_seed(seed)
    graph = _graph(60, 300, seed, index_dtype)
    L = 1 + seed % 3
    dims = torch.randint(1, 40, (L + 1,), generator=g).tolist()
    lc = torch.rand(3 * (L + 1), generator=g, dtype=torch.float64) * 1e-3
    held = _masks(60, L, g, 0.3)
    avail = [h | c for h, c in zip(held, _masks(60, L, g, 0.2))]
    for k in range(L):
        cand = torch.unique(torch.randint(0, 60, (25,), generator=g))
        ok = avail[:k] + [held[k]]
        cost, mem, rows = ref.subtree(graph, cand, k, held, avail, dims, lc)
        n_cost, n_mem = subtree_costs(graph.indptr, graph.indices, cand, ok, dims, lc,
                                      EDGE_BYTES, num_threads=2)
        assert torch.equal(n_cost, cost) and torch.equal(n_mem, mem), (k, L)
        take = torch.rand(cand.numel(), generator=g) < 0.5
        marked = subtree_rows(graph.indptr, graph.indices, cand, take, ok, num_threads=2)
        assert len(marked) == k + 1
        for j, ci, v in rows:
            want = torch.zeros(60, dtype=torch.bool)
            want[v[take[ci]]] = True
            assert torch.equal(marked[j], want), (k, j)


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_in_edges_match_reference(index_dtype):
    graph = _graph(50, 400, 3, index_dtype)
    g = torch.Generator().manual_seed(0)
    for ids in (torch.randint(0, 50, (70,), generator=g), torch.arange(50), torch.zeros(0)):
        got, want = in_edges(graph, ids), ref.in_edges(graph, ids)
        assert all(torch.equal(a, b) and a.dtype == torch.int64 for a, b in zip(got, want))
        want_mask = torch.zeros(50, dtype=torch.bool)
        want_mask[ids.long()] = True
        want_mask[want[0]] = True
        assert torch.equal(needed_mask(graph.indptr, graph.indices, ids), want_mask)
    with pytest.raises(RuntimeError, match="in_edges: id out of"):
        in_edges(graph, torch.tensor([50]))


def test_subtrees_check_their_inputs():
    graph = _graph(10, 30, 0)
    ok = [torch.zeros(10, dtype=torch.bool)]
    with pytest.raises(RuntimeError, match="id out of"):
        subtree_costs(graph.indptr, graph.indices, torch.tensor([10]), ok, [4, 4],
                      torch.zeros(6, dtype=torch.float64), EDGE_BYTES)
    with pytest.raises(RuntimeError, match="availability mask must be a bool tensor"):
        subtree_rows(graph.indptr, graph.indices, torch.tensor([1]), torch.tensor([True]),
                     [torch.zeros(9, dtype=torch.bool)])


@pytest.mark.parametrize("seed", range(12))
def test_hybrid_plan_matches_reference(seed):
    """Whole bottom-up plans: random graphs, parts, costs, mu, and budgets that cut off."""
    g = torch.Generator().manual_seed(seed)
    n = 80 + 20 * (seed % 3)
    graph = _graph(n, 6 * n, seed, torch.int32 if seed % 2 else torch.int64)
    world, L = 2 + seed % 3, 2 + seed % 2
    part = torch.randint(0, world, (n,), generator=g)
    dims = [16] + [8 * (1 + (seed + i) % 3) for i in range(L - 1)] + [4]
    costs = {"t_vertex": 1e-9, "t_edge": float(1e-8 * (1 + seed % 4)),
             "t_comm": float(1e-7 * (seed % 5) / 2)}
    mu = (1.0, 0.5, 0.25)[seed % 3]
    deps = Hybrid(costs=costs, mu=mu)
    lc = deps.layer_costs(dims)
    rows = {}
    for cap_bytes in (None, 0, 2000, 6000):
        for rank in range(world):
            is_master = part == rank
            want = ref.hybrid_replicas(graph, is_master, mu, dims, lc, cap_bytes)
            got = hybrid_replicas(graph, is_master, deps, dims, lc, cap_bytes)
            assert all(torch.equal(a, b) for a, b in zip(got, want)), (cap_bytes, rank)
            rows[cap_bytes, rank] = sum(int(r.sum()) for r in got)
    if costs["t_comm"] > 0:  # the cases replicate, and the small budget cuts the plan short
        assert 0 < rows[2000, 0] < rows[None, 0] and rows[0, 0] == 0
