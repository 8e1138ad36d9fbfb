"""Typed sampling: a fanout per edge type in the native sampler (against a Python reference
of the per-type draw), keyed so that threads and batch cuts do not change it, weighted and -1/0
fanouts, the fanout syntax and its one-line refusals, and negatives within a node type's
range."""

from __future__ import annotations

import pytest
import torch

from gnnscale.data.hetero_sim import generate
from gnnscale.data.schemas import HeteroSimConfig
from gnnscale.errors import ConfigError
from gnnscale.ops.sampling import negative_sample, sample_neighbors, typed_runs
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.schemas import fanout_table, layer_fanouts
from tests.data.test_typed_graph_store import build


@pytest.fixture(scope="module")
def sim():
    return generate(HeteroSimConfig(scale=0.002, num_features=4, seed=0))


def runs_of(graph, type_per_edge=None, edge_dst_types=None):
    """The graph's run table (by default from its own types)."""
    dst = edge_dst_types or [graph.node_types.index(et[2]) for et in graph.edge_types]
    tpe = graph.type_per_edge if type_per_edge is None else type_per_edge
    return typed_runs(graph.indptr, tpe, graph.node_type_offset, dst)


def typed_degrees(graph, v: int) -> dict[int, list[int]]:
    """The in-edge ids of ``v`` per edge type."""
    out: dict[int, list[int]] = {}
    for e in range(int(graph.indptr[v]), int(graph.indptr[v + 1])):
        out.setdefault(int(graph.type_per_edge[e]), []).append(e)
    return out


def check_against_reference(graph, batch, table: list[list[int]], replace: bool = False):
    """Every block is a per-type draw: per (destination, type) min(fanout, degree) distinct
    edges of that type (all of them for -1, none for 0), ids and types consistent."""
    for h, block in enumerate(reversed(batch.blocks)):
        src, dst = batch.n_id[block.edge_index[0]], batch.n_id[block.edge_index[1]]
        assert torch.equal(graph.indices[block.e_id], src)
        assert torch.equal(block.edge_type, graph.type_per_edge[block.e_id].long())
        drawn: dict[tuple[int, int], list[int]] = {}
        for e, d in zip(block.e_id.tolist(), dst.tolist()):
            drawn.setdefault((d, int(graph.type_per_edge[e])), []).append(e)
        for v in batch.n_id[: block.num_dst].tolist():
            for t, edges in typed_degrees(graph, v).items():
                got = drawn.get((v, t), [])
                assert set(got) <= set(edges)
                f = table[h][t]
                want = len(edges) if f == -1 else f if replace and f else min(f, len(edges))
                assert len(got) == want, (h, v, t)
                if not replace:
                    assert len(set(got)) == len(got)
                if f == -1:
                    assert sorted(got) == edges
        assert all(table[h][t] != 0 for _, t in drawn)


def test_typed_draw_matches_the_per_type_reference():
    graph = build()
    names = [et[1] for et in graph.edge_types]
    layers = [{n: f for n, f in zip(names, [2, -1, 1, 0, 3, 1])}, 1]
    sampler = NeighborSampler(layers)
    batch = sampler.sample(graph, torch.arange(graph.num_nodes), seed=4)
    table = fanout_table(layers, graph.edge_types)
    assert table[1] == [1] * len(names)
    check_against_reference(graph, batch, table)
    # the dict of per-layer lists (PyG's form) is the same sampler
    by_type = {n: [table[0][t], 1] for t, n in enumerate(names)}
    again = NeighborSampler(by_type).sample(graph, torch.arange(graph.num_nodes), seed=4)
    assert all(torch.equal(a.e_id, b.e_id) for a, b in zip(batch.blocks, again.blocks))


def test_all_in_edges_need_no_run_table():
    """Fanout -1 everywhere takes the same edges, in the same order, through the untyped
    kernel: no run table is built (evaluation and FullNeighborSampler on typed graphs)."""
    graph = build()
    seeds = torch.arange(graph.num_nodes)
    sampler = NeighborSampler([-1, -1])
    whole = sampler.sample(graph, seeds, seed=1)
    assert sampler._runs is None
    names = [et[1] for et in graph.edge_types]
    typed = NeighborSampler([{n: -1 for n in names}, {**{n: -1 for n in names}, "writes": 9}])
    per_type = typed.sample(graph, seeds, seed=1)
    assert typed._runs is not None
    assert torch.equal(whole.blocks[-1].e_id, per_type.blocks[-1].e_id)
    check_against_reference(graph, whole, [[-1] * 6] * 2)


def test_one_edge_type_draws_what_the_untyped_sampler_draws(sim):
    seeds = torch.arange(0, sim.num_nodes, 7)
    one = typed_runs(sim.indptr, torch.zeros_like(sim.type_per_edge),
                     torch.tensor([0, sim.num_nodes]), [0])
    for weights in (None, torch.rand(sim.num_edges, generator=torch.Generator().manual_seed(0))):
        plain = sample_neighbors(sim.indptr, sim.indices, weights, seeds, [5, 3], False, 11,
                                 edge_ids=True)
        typed = sample_neighbors(sim.indptr, sim.indices, weights, seeds, [[5], [3]], False, 11,
                                 edge_ids=True, typed=one)
        assert torch.equal(plain[0], typed[0])
        assert all(torch.equal(a, b) for a, b in zip(plain[3], typed[3]))


@pytest.mark.parametrize("replace", [False, True])
def test_typed_sample_is_the_same_for_any_threads_and_batch_cut(sim, replace):
    sampler = NeighborSampler([3, 2], replace=replace)
    seeds = torch.randperm(sim.num_nodes, generator=torch.Generator().manual_seed(1))[:1500]
    a, b = seeds[:600], seeds
    one = NeighborSampler(sampler.fanouts, replace=replace, threads=1).sample(sim, b, seed=9)
    two = NeighborSampler(sampler.fanouts, replace=replace, threads=2).sample(sim, b, seed=9)
    assert torch.equal(one.n_id, two.n_id)
    assert all(torch.equal(x.e_id, y.e_id) for x, y in zip(one.blocks, two.blocks))
    part = sampler.sample(sim, a, seed=9)
    for whole, mine in zip(reversed(one.blocks), reversed(part.blocks)):
        dsts = set(part.n_id[: mine.num_dst].tolist())
        dst_of = one.n_id[whole.edge_index[1]]
        keep = torch.tensor([d in dsts for d in dst_of.tolist()])
        assert sorted(whole.e_id[keep].tolist()) == sorted(mine.e_id.tolist())
    if not replace:
        check_against_reference(sim, part, [[3] * 8, [2] * 8])


@pytest.mark.parametrize("replace", [False, True])
def test_weighted_typed_draws_never_pick_zero_weight_edges(sim, replace):
    gen = torch.Generator().manual_seed(2)
    weights = torch.rand(sim.num_edges, generator=gen) * (torch.rand(sim.num_edges,
                                                                     generator=gen) < 0.5)
    table = [[3, 0, 2, 1, 2, 1, 4, 2], [2] * 8]
    seeds = torch.arange(0, sim.num_nodes, 3)
    _, _, _, e_ids = sample_neighbors(sim.indptr, sim.indices, weights, seeds, table, replace,
                                      5, edge_ids=True, typed=runs_of(sim))
    for h, e in enumerate(e_ids):
        assert e.numel() > 0 and bool((weights[e] > 0).all())
        assert set(sim.type_per_edge[e].unique().tolist()) == {t for t in range(8)
                                                             if table[h][t] != 0}


def test_typed_sampling_refuses_bad_types():
    graph = build()
    tpe = graph.type_per_edge
    dst = torch.repeat_interleave(torch.arange(graph.num_nodes), graph.indptr.diff())
    reversed_per_dst = torch.argsort(dst * graph.num_edges - torch.arange(graph.num_edges))
    with pytest.raises(ValueError, match="in-edges of vertex .* are not sorted by edge type"):
        runs_of(graph, tpe[reversed_per_dst])
    with pytest.raises(ValueError, match="holds types in \\[0, 5\\], outside \\[0, 5\\)"):
        runs_of(graph, tpe, [0, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="enters vertex .* not its edge type's node type"):
        runs_of(graph, tpe, [0] * 6)
    runs = runs_of(graph)
    seeds = torch.arange(graph.num_nodes)
    with pytest.raises(ValueError, match="num_edge_types=6"):
        sample_neighbors(graph.indptr, graph.indices, None, seeds, [2, 2], False, 0, typed=runs)
    with pytest.raises(RuntimeError, match="the run table has"):
        sample_neighbors(graph.indptr, graph.indices, None, seeds, [[2] * 6], False, 0,
                         typed=runs._replace(runs=runs.runs[1:]))
    with pytest.raises(RuntimeError, match="does not cover every destination's in-edges"):
        sample_neighbors(graph.indptr, graph.indices, None, seeds, [[2] * 6], False, 0,
                         typed=runs._replace(runs=runs.runs // 2))


def test_fanout_dicts_are_refused_in_one_line():
    graph = build()
    names = [et[1] for et in graph.edge_types]
    full = {n: 1 for n in names}
    assert fanout_table([{**full, "writes": 4}], graph.edge_types)[0][0] == 4
    keyed = {("author__writes__paper" if n == "writes" else n): 1 for n in names}
    assert fanout_table([keyed], graph.edge_types) == [[1] * 6]
    cases = [({n: 1 for n in names[1:]}, "misses edge type\\(s\\) writes of the graph"),
             ({**full, "reads": 1}, "names edge type 'reads', which the graph lacks"),
             ({**full, "author__writes__paper": 2}, "names edge type author__writes__paper "
                                                    "twice")]
    for layer, match in cases:
        with pytest.raises(ConfigError, match=match) as err:
            fanout_table([layer], graph.edge_types)
        assert "\n" not in str(err.value)
    twice = graph.edge_types + (("field", "cites", "paper"),)
    with pytest.raises(ConfigError, match="key 'cites' is ambiguous.*src__rel__dst"):
        fanout_table([{**full, "cites": 1}], twice)
    with pytest.raises(ConfigError, match="different numbers of layers"):
        fanout_table({"writes": [1, 2], "cites": [1]}, graph.edge_types)
    with pytest.raises(ConfigError, match="must be -1"):
        NeighborSampler([{**full, "writes": -2}])
    # what the cost model reads per layer: a dict's draws at most, -1 when a type takes all
    assert layer_fanouts([{"to": 5}, {"a": 2, "b": 3}, 4]) == [5, 5, 4]
    assert layer_fanouts({"a": [1, -1], "b": [2, 2]}) == [3, -1]


def test_launcher_checks_typed_fanouts_against_the_dataset(tmp_path):
    from gnnscale.runner.validate import validate
    from gnnscale.strategies.config import check_fanouts
    from tests._train import make_cfg

    base = ("dataset=hetero_sim", "dataset.scale=0.002", "logger=none", "model.num_layers=2")
    cfg = make_cfg(tmp_path, *base, "sampler.fanouts=[{writes:10,cites:5,reads:1},5]")
    with pytest.raises(ConfigError, match=r"names edge type 'reads', which dataset "
                                          r"hetero_sim-x0.002 lacks \(its edge types: writes"):
        validate(cfg)
    cfg = make_cfg(tmp_path, *base, "sampler.fanouts=[{writes:0,cites:0},5]")
    with pytest.raises(ConfigError, match="must draw some type"):
        check_fanouts(cfg)
    cfg = make_cfg(tmp_path, *base, "sampler.fanouts=[{writes:1},{writes:1},{writes:1}]")
    with pytest.raises(ConfigError, match="has 3 entries.*model.num_layers=2"):
        check_fanouts(cfg)


def test_negatives_within_a_node_type_range():
    keys = torch.arange(2000)
    s, d = negative_sample(50, keys, 2, seed=3, dst_range=(10, 20))
    assert int(d.min()) == 10 and int(d.max()) == 19 and int(s.max()) > 20
    s, d = negative_sample(50, keys, 2, seed=3, src_range=(0, 5), dst_range=(40, 50))
    assert int(s.max()) < 5 and int(d.min()) >= 40
    src = torch.full((2000,), 7)
    s, d = negative_sample(50, keys, 2, seed=3, sources=src, dst_range=(30, 35))
    assert bool((s == 7).all()) and int(d.min()) >= 30 and int(d.max()) < 35
    same = negative_sample(50, keys, 2, seed=3, src_range=(0, 50), dst_range=(0, 50))
    plain = negative_sample(50, keys, 2, seed=3)
    assert torch.equal(same[0], plain[0]) and torch.equal(same[1], plain[1])
    with pytest.raises(RuntimeError, match="dst_range must be \\[lo, hi\\)"):
        negative_sample(50, keys, 2, seed=3, dst_range=(20, 60))


def test_typed_negatives_stay_in_the_edge_types_node_types():
    from gnnscale.tasks.link.negatives import draw, exclusion, type_ranges

    graph = build()
    writes = ("author", "writes", "paper")
    src_range, dst_range = type_ranges(graph.node_type_offset, graph.node_types, writes)
    assert (src_range, dst_range) == ((6, 10), (0, 6))
    indptr, indices, table = exclusion(graph.indptr, graph.indices)
    keys = torch.arange(300)
    s, d = draw(graph.num_nodes, torch.full((300,), 7), keys, 2, "uniform", 1, indptr, indices,
                table, src_range=src_range, dst_range=dst_range)
    assert bool(((s >= 6) & (s < 10)).all()) and bool((d < 6).all())
    edges = set(zip(*graph.edge_index().tolist()))
    assert sum((a, b) in edges for a, b in zip(s.tolist(), d.tolist())) == 0
