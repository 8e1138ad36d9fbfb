"""Native neighbor sampling: validity, fanouts, distributions, determinism, relabel, errors."""

from collections import Counter

import pytest
import torch
from omegaconf import OmegaConf
from scipy.stats import chisquare
from torch_geometric.nn import SAGEConv

from gnnscale import registry
from gnnscale.data.graph import GraphStore
from gnnscale.ops.sampling import sample_neighbors
from gnnscale.sampling.full import FullNeighborSampler
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.schemas import FullNeighborSamplerConfig, NeighborSamplerConfig

P_MIN = 1e-4  # chi-square tests fail only on a real bias (fixed seeds: no flakiness)


def _graph(n=300, e=3600, seed=0, **kw) -> GraphStore:
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=g)
    return GraphStore.from_edge_index(ei, n, **kw)


def _star(deg: int, weights=None) -> GraphStore:
    """Vertex 0 with in-neighbors 1..deg."""
    src = torch.arange(1, deg + 1)
    ei = torch.stack([src, torch.zeros_like(src)])
    return GraphStore.from_edge_index(ei, deg + 1, edge_weight=weights)


def _global_edges(batch):
    """Per block (input layer first): list of (global src, global dst) pairs."""
    return [list(zip(batch.n_id[b.edge_index[0]].tolist(), batch.n_id[b.edge_index[1]].tolist()))
            for b in batch.blocks]


def _in_neighbors(graph, v):
    return graph.indices[graph.indptr[v]:graph.indptr[v + 1]].tolist()


def _star_counts(sampler, graph, draws):
    counts = Counter()
    for s in range(draws):
        batch = sampler.sample(graph, torch.tensor([0]), seed=s)
        counts.update(batch.n_id[batch.blocks[-1].edge_index[0]].tolist())
    return counts


def test_block_structure_edges_exist_fanouts_respected():
    graph = _graph()
    edges = set(zip(graph.edge_index()[0].tolist(), graph.edge_index()[1].tolist()))
    fanouts = [5, 3, 2]
    seeds = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(1))[:20]
    batch = NeighborSampler(fanouts).sample(graph, seeds, seed=7)
    assert torch.equal(batch.targets, seeds) and batch.num_targets == 20
    assert batch.n_id.unique().numel() == batch.n_id.numel()
    assert len(batch.blocks) == 3
    assert batch.blocks[0].size[0] == batch.n_id.numel()
    assert batch.blocks[-1].size[1] == 20
    for block in batch.blocks:
        assert torch.equal(block.src_ids, batch.n_id[: block.size[0]])
    for lower, upper in zip(batch.blocks[:-1], batch.blocks[1:]):
        assert lower.size[1] == upper.size[0]  # a layer's destinations feed the next layer
    for block, fanout, pairs in zip(batch.blocks, reversed(fanouts), _global_edges(batch)):
        src, dst = block.edge_index
        assert int(src.max()) < block.size[0] and int(dst.max()) < block.size[1]
        assert all(p in edges for p in pairs)
        per_dst = Counter(dst.tolist())
        for d in range(block.size[1]):
            v = int(batch.n_id[d])
            assert per_dst.get(d, 0) == min(fanout, len(_in_neighbors(graph, v)))
        assert len(set(pairs)) == len(pairs)  # no neighbor twice (deduped graph)
        # new local ids appear in first-appearance order
        fresh = [s for s in src.tolist() if s >= block.size[1]]
        firsts = list(dict.fromkeys(fresh))
        assert firsts == list(range(block.size[1], block.size[1] + len(firsts)))


def test_no_duplicate_positions_on_multigraph():
    ei = torch.tensor([[1, 1, 1, 2, 2, 3], [0, 0, 0, 0, 0, 0]])
    graph = GraphStore.from_edge_index(ei, 4, dedupe=False)
    for s in range(50):
        batch = NeighborSampler([5]).sample(graph, torch.tensor([0]), seed=s)
        got = Counter(batch.n_id[batch.blocks[0].edge_index[0]].tolist())
        assert sum(got.values()) == 5
        assert got[1] <= 3 and got[2] <= 2 and got[3] <= 1


@pytest.mark.parametrize("deg,fanout,draws", [(20, 5, 1500), (200, 100, 150)])
def test_uniform_without_replacement_is_uniform(deg, fanout, draws):
    counts = _star_counts(NeighborSampler([fanout]), _star(deg), draws)
    assert sum(counts.values()) == fanout * draws
    observed = [counts[i] for i in range(1, deg + 1)]
    assert chisquare(observed).pvalue > P_MIN


def test_uniform_with_replacement():
    graph = _star(4)
    sampler = NeighborSampler([10], replace=True)
    batch = sampler.sample(graph, torch.tensor([0]), seed=3)
    assert batch.blocks[0].num_edges == 10  # fanout draws even though deg = 4
    counts = _star_counts(sampler, graph, 400)
    assert chisquare([counts[i] for i in range(1, 5)]).pvalue > P_MIN


def test_weighted_sampling_follows_weights():
    w = torch.tensor([1.0, 2.0, 3.0, 4.0, 0.0])
    graph = _star(5, weights=w)
    with_repl = _star_counts(NeighborSampler([4], replace=True, weighted=True), graph, 500)
    expected = [2000 * x / 10 for x in (1, 2, 3, 4)]
    assert with_repl[5] == 0
    assert chisquare([with_repl[i] for i in range(1, 5)], expected).pvalue > P_MIN
    # without replacement and fanout 1, Efraimidis-Spirakis draws exactly in proportion to w
    one = _star_counts(NeighborSampler([1], weighted=True), graph, 2000)
    assert one[5] == 0
    assert chisquare([one[i] for i in range(1, 5)], expected).pvalue > P_MIN
    # fanout above the positive-weight count takes exactly the positive-weight neighbors
    batch = NeighborSampler([5], weighted=True).sample(graph, torch.tensor([0]), seed=0)
    assert sorted(batch.n_id[batch.blocks[0].edge_index[0]].tolist()) == [1, 2, 3, 4]
    two = _star_counts(NeighborSampler([2], weighted=True), graph, 500)
    assert two[5] == 0 and sum(two.values()) == 1000 and two[4] > two[2] > two[1]


@pytest.mark.parametrize("replace,weighted", [(False, False), (True, False), (False, True),
                                              (True, True)])
def test_same_seed_same_sample_whatever_threads(replace, weighted):
    graph = _graph(n=4000, e=80000, seed=2)
    graph.edge_weight = torch.rand(graph.num_edges, generator=torch.Generator().manual_seed(0))
    sampler = NeighborSampler([15, 10, 5], replace=replace, weighted=weighted)
    seeds = torch.arange(0, 4000, 7)
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        a = sampler.sample(graph, seeds, seed=11)
        torch.set_num_threads(2)
        b = sampler.sample(graph, seeds, seed=11)
    finally:
        torch.set_num_threads(old)
    c = sampler.sample(graph, seeds, seed=12)
    assert torch.equal(a.n_id, b.n_id)
    assert all(torch.equal(x.edge_index, y.edge_index) for x, y in zip(a.blocks, b.blocks))
    assert not torch.equal(a.blocks[0].edge_index, c.blocks[0].edge_index)


def test_fanout_minus_one_is_full_in_neighborhood():
    graph = _graph(n=200, e=1000)
    seeds = torch.tensor([3, 50, 199])
    batch = FullNeighborSampler(num_layers=2).sample(graph, seeds, seed=0)
    assert batch.blocks[0].size[0] == batch.n_id.numel()
    for block in batch.blocks:
        src, dst = block.edge_index
        for d in range(block.size[1]):
            v = int(batch.n_id[d])
            got = sorted(batch.n_id[src[dst == d]].tolist())
            assert got == sorted(_in_neighbors(graph, v))
    # the 2-hop in-neighborhood, and nothing else
    hop1 = {u for v in seeds.tolist() for u in _in_neighbors(graph, v)} | set(seeds.tolist())
    hop2 = {u for v in hop1 for u in _in_neighbors(graph, v)} | hop1
    assert set(batch.n_id.tolist()) == hop2


def _check_edge_ids(graph, batch):
    """Every block's ``e_id`` names its edges: source ``indices[e_id]``, in the destination's
    ``indptr`` range."""
    for b in batch.blocks:
        assert b.e_id is not None and b.e_id.dtype == torch.int64
        src, dst = batch.n_id[b.edge_index[0]], batch.n_id[b.edge_index[1]]
        assert torch.equal(graph.indices[b.e_id], src)
        assert bool(((graph.indptr[dst] <= b.e_id) & (b.e_id < graph.indptr[dst + 1])).all())


def test_blocks_carry_edge_ids_and_types_when_asked_or_typed():
    graph = _graph(n=200, e=2000)
    seeds = torch.arange(0, 200, 9)
    plain = NeighborSampler([4, 3]).sample(graph, seeds, seed=3)
    assert all(b.e_id is None and b.edge_type is None for b in plain.blocks)
    asked = NeighborSampler([4, 3], with_edge_ids=True).sample(graph, seeds, seed=3)
    assert torch.equal(asked.n_id, plain.n_id)  # the same sample, with its edge ids
    assert all(torch.equal(a.edge_index, b.edge_index) for a, b in zip(asked.blocks,
                                                                      plain.blocks))
    _check_edge_ids(graph, asked)
    assert all(b.edge_type is None for b in asked.blocks)
    full = FullNeighborSampler(2, with_edge_ids=True).sample(graph, seeds, seed=0)
    _check_edge_ids(graph, full)
    dst = full.n_id[: full.blocks[-1].num_dst]  # the targets' block holds every in-edge
    assert full.blocks[-1].e_id.sort().values.tolist() == [
        e for v in dst.tolist() for e in range(int(graph.indptr[v]), int(graph.indptr[v + 1]))]
    # a graph with edge types: ids without asking, and each edge's type
    from tests.data.test_typed_graph_store import build

    graph = build()
    typed = NeighborSampler([4, 3]).sample(graph, torch.arange(graph.num_nodes), seed=3)
    _check_edge_ids(graph, typed)
    for b in typed.blocks:
        assert b.edge_type.dtype == torch.int64
        assert torch.equal(b.edge_type, graph.type_per_edge[b.e_id].long())
    moved = typed.blocks[0].to("cpu")
    assert torch.equal(moved.e_id, typed.blocks[0].e_id)
    assert torch.equal(moved.edge_type, typed.blocks[0].edge_type)


def test_int32_indices_give_the_same_sample():
    g64 = _graph(n=500, e=6000, seed=4)
    g32 = GraphStore(indptr=g64.indptr, indices=g64.indices.int())
    seeds = torch.arange(0, 500, 9)
    for sampler in (NeighborSampler([6, 4]), NeighborSampler([6, 4], replace=True)):
        a, b = sampler.sample(g64, seeds, seed=5), sampler.sample(g32, seeds, seed=5)
        assert torch.equal(a.n_id, b.n_id)
        assert all(torch.equal(x.edge_index, y.edge_index) for x, y in zip(a.blocks, b.blocks))


def test_sage_conv_runs_on_blocks_and_full_blocks_match_whole_graph():
    graph = _graph(n=200, e=1500, seed=3)
    torch.manual_seed(0)
    x = torch.randn(graph.num_nodes, 8)
    convs = [SAGEConv(8, 16), SAGEConv(16, 4)]
    seeds = torch.tensor([0, 17, 42, 199])
    batch = FullNeighborSampler(num_layers=2).sample(graph, seeds, seed=0)
    h = x[batch.n_id]
    for conv, block in zip(convs, batch.blocks):
        h = conv((h, h[: block.num_dst]), block.edge_index, size=block.size)
    full = x
    for conv in convs:
        full = conv(full, graph.edge_index())
    assert torch.allclose(h, full[seeds], atol=1e-5)
    sampled = NeighborSampler([3, 2]).sample(graph, seeds, seed=1)
    h = x[sampled.n_id]
    for conv, block in zip(convs, sampled.blocks):
        h = conv((h, h[: block.num_dst]), block.edge_index, size=block.size)
    assert h.shape == (4, 4)


def test_duplicate_and_empty_seeds():
    graph = _graph(n=100, e=800)
    batch = NeighborSampler([4, 2]).sample(graph, torch.tensor([5, 5, 9]), seed=0)
    assert batch.targets.tolist() == [5, 5, 9]
    empty = NeighborSampler([4, 2]).sample(graph, torch.tensor([], dtype=torch.long), seed=0)
    assert empty.n_id.numel() == 0 and all(b.num_edges == 0 for b in empty.blocks)


def test_schemas_build_samplers():
    sampler = registry.build(OmegaConf.structured(NeighborSamplerConfig))
    assert isinstance(sampler, NeighborSampler) and sampler.fanouts == [15, 10, 5]
    assert sampler.num_layers == 3
    full = registry.build(OmegaConf.structured(FullNeighborSamplerConfig(num_layers=2)))
    assert isinstance(full, FullNeighborSampler) and full.fanouts == [-1, -1]
    assert not sampler.with_edge_ids and not full.with_edge_ids
    asked = registry.build(OmegaConf.structured(NeighborSamplerConfig(with_edge_ids=True)))
    assert asked.with_edge_ids and "with_edge_ids=True" in repr(asked)


def test_bad_inputs_give_clear_errors():
    graph = _graph(n=50, e=200)
    op = sample_neighbors
    with pytest.raises(RuntimeError, match="seeds hold ids in"):
        op(graph.indptr, graph.indices, None, torch.tensor([50]), [2], False, 0)
    with pytest.raises(RuntimeError, match="seeds hold ids in"):
        op(graph.indptr, graph.indices, None, torch.tensor([-1]), [2], False, 0)
    with pytest.raises(RuntimeError, match="fanouts is empty"):
        op(graph.indptr, graph.indices, None, torch.tensor([0]), [], False, 0)
    with pytest.raises(RuntimeError, match="indices must be int64 or int32"):
        op(graph.indptr, graph.indices.float(), None, torch.tensor([0]), [2], False, 0)
    with pytest.raises(RuntimeError, match="one entry per edge"):
        op(graph.indptr, graph.indices, torch.ones(3), torch.tensor([0]), [2], False, 0)
    with pytest.raises(RuntimeError, match="weights must be float32"):
        op(graph.indptr, graph.indices, torch.ones(graph.num_edges, dtype=torch.float64),
           torch.tensor([0]), [2], False, 0)
    with pytest.raises(RuntimeError, match="indptr\\[-1\\]"):
        op(graph.indptr, graph.indices[:-1], None, torch.tensor([0]), [2], False, 0)
    with pytest.raises(RuntimeError, match="seeds must be int64"):
        op(graph.indptr, graph.indices, None, torch.tensor([0], dtype=torch.int32), [2], False, 0)
    with pytest.raises(ValueError, match="fanouts is empty"):
        NeighborSampler([])
    with pytest.raises(ValueError, match="-1"):
        NeighborSampler([5, -3])
    with pytest.raises(ValueError, match="no edge_weight"):
        NeighborSampler([2], weighted=True).sample(graph, torch.tensor([0]))
    with pytest.raises(TypeError, match="integer vertex ids"):
        NeighborSampler([2]).sample(graph, torch.tensor([0.5]))
    graph.edge_weight = -torch.ones(graph.num_edges)
    with pytest.raises(RuntimeError, match="non-negative"):
        NeighborSampler([2], weighted=True).sample(graph, torch.arange(50))
    bad = GraphStore(indptr=torch.tensor([0, 1, 1]), indices=torch.tensor([1]))
    bad.indices[0] = 7  # damaged after GraphStore's own checks: the op must still refuse it
    with pytest.raises(RuntimeError, match="outside \\[0, 2\\)"):
        NeighborSampler([1]).sample(bad, torch.tensor([0]))


def test_automatic_threads_never_compete_with_compute():
    import threading

    sampler = NeighborSampler([2])
    assert sampler.threads_for_call() == torch.get_num_threads()  # inline: compute is waiting
    seen = []
    worker = threading.Thread(target=lambda: seen.append(sampler.threads_for_call()))
    worker.start()
    worker.join()
    assert seen == [1]                                           # beside compute (prefetch)
    assert NeighborSampler([2], threads=3).threads_for_call() == 3
    with pytest.raises(ValueError, match="sampler.threads"):
        NeighborSampler([2], threads=-1)
