"""sampler=random_walk: the native op (against a slow reference with the same RNG), weighted
blocks that SAGE, GCN and GIN consume, and the checks that refuse what cannot use them."""

import pytest
import torch

from gnnscale.data.graph import GraphStore
from gnnscale.models.gat import GAT
from gnnscale.models.gcn import GCN, block_gcn_norm
from gnnscale.models.gin import GIN
from gnnscale.models.sage import SAGE
from gnnscale.ops.sampling import random_walk_top_k
from gnnscale.sampling.base import Block
from gnnscale.sampling.random_walk import RandomWalkSampler
from tests._data_fns import make_graph

M64 = (1 << 64) - 1
WALK_SALT = 0x7A3D1E5B9C4F2861  # csrc/sampling/cpu/random_walk_kernel.cpp


def _mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


class _Rng:
    """csrc/utils/rng.h's KeyedRng, in Python integers."""

    def __init__(self, seed: int, hop: int, vertex: int) -> None:
        self.state = _mix64(_mix64(_mix64(seed ^ 0x6A09E667F3BCC909) ^ (hop + 1)) ^ vertex)

    def below(self, n: int) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & M64
        return (_mix64(self.state) * n) >> 64


def _reference(graph, targets, walks, length, top_k, seed, hop):
    """The op's result computed one walk at a time in Python."""
    indptr, indices = graph.indptr.tolist(), graph.indices.tolist()
    owner, vertex, count = [], [], []
    for pos, v in enumerate(targets.tolist()):
        visits: dict[int, int] = {}
        for w in range(walks):
            rng, cur = _Rng((_mix64(seed ^ WALK_SALT) + w) & M64, hop, v), v
            for _ in range(length):
                deg = indptr[cur + 1] - indptr[cur]
                if deg == 0:
                    break
                cur = indices[indptr[cur] + rng.below(deg)]
                if cur != v:
                    visits[cur] = visits.get(cur, 0) + 1
        for u, c in sorted(visits.items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]:
            owner.append(pos)
            vertex.append(u)
            count.append(c)
    return [torch.tensor(t, dtype=torch.int64) for t in (owner, vertex, count)]


def _sparse_graph(n: int, e: int) -> GraphStore:
    """A small directed graph where some vertices have no in-edges (their walks stop)."""
    g = torch.Generator().manual_seed(5)
    return GraphStore.from_edge_index(torch.randint(0, n, (2, e), generator=g), n)


def _reachable(graph, steps: int) -> torch.Tensor:
    """``r[d, s]``: s reaches d along at most ``steps`` edges (walks follow in-edges of d)."""
    n = graph.num_nodes
    adj = torch.zeros(n, n, dtype=torch.bool)
    dst = torch.repeat_interleave(torch.arange(n), graph.indptr[1:] - graph.indptr[:-1])
    adj[dst, graph.indices] = True
    reach, frontier = adj.clone(), adj.clone()
    for _ in range(steps - 1):
        frontier = (frontier.float() @ adj.float()) > 0
        reach |= frontier
    return reach


@pytest.mark.parametrize("walks,length,top_k,seed,hop", [(4, 3, 5, 11, 0), (3, 5, 2, 2, 1),
                                                         (1, 1, 4, 0, 2)])
def test_native_op_equals_python_reference(walks, length, top_k, seed, hop):
    graph = _sparse_graph(60, 90)
    targets = torch.tensor([0, 5, 17, 5, 59, 33])
    got = random_walk_top_k(graph.indptr, graph.indices, targets, walks, length, top_k, seed,
                            hop, num_threads=1)
    want = _reference(graph, targets, walks, length, top_k, seed, hop)
    for g, w in zip(got, want):
        assert torch.equal(g, w)
    got32 = random_walk_top_k(graph.indptr, graph.indices.int(), targets, walks, length, top_k,
                              seed, hop)
    assert all(torch.equal(g, w) for g, w in zip(got32, want))


def test_native_op_is_independent_of_the_thread_count(tiny_graph):
    targets = torch.arange(0, tiny_graph.num_nodes, 2)  # many chunks of 64 targets
    one = random_walk_top_k(tiny_graph.indptr, tiny_graph.indices, targets, 4, 3, 5, 7, 1,
                            num_threads=1)
    for threads in (2, 4):
        many = random_walk_top_k(tiny_graph.indptr, tiny_graph.indices, targets, 4, 3, 5, 7, 1,
                                 num_threads=threads)
        assert all(torch.equal(a, b) for a, b in zip(one, many))
    other = random_walk_top_k(tiny_graph.indptr, tiny_graph.indices, targets, 4, 3, 5, 8, 1)
    assert not torch.equal(one[1], other[1])


def test_native_op_refuses_malformed_input():
    graph = _sparse_graph(20, 40)
    ip, ix, t = graph.indptr, graph.indices, torch.tensor([0, 1])
    with pytest.raises(RuntimeError, match="targets hold ids in"):
        random_walk_top_k(ip, ix, torch.tensor([0, 20]), 2, 2, 2, 0)
    with pytest.raises(RuntimeError, match="walk_length must be >= 1"):
        random_walk_top_k(ip, ix, t, 2, 0, 2, 0)
    with pytest.raises(RuntimeError, match="top_k must be >= 1"):
        random_walk_top_k(ip, ix, t, 2, 2, 0, 0)
    with pytest.raises(RuntimeError, match="indptr must run from 0"):
        random_walk_top_k(ip[:-1], ix, t, 2, 2, 2, 0)
    with pytest.raises(RuntimeError, match="targets must be int64"):
        random_walk_top_k(ip, ix, t.int(), 2, 2, 2, 0)
    bad = ix.clone()
    bad[:] = 99
    with pytest.raises(RuntimeError, match="indices hold ids outside"):
        random_walk_top_k(ip, bad, t, 2, 2, 2, 0)


def test_random_walk_blocks_are_top_k_walk_neighbourhoods():
    graph = make_graph()
    sampler = RandomWalkSampler(num_layers=2, num_walks=4, walk_length=3, top_k=5)
    targets = torch.arange(0, 40, 3)
    mb = sampler.sample(graph, targets, seed=11)
    assert torch.equal(mb.targets, targets) and len(mb.blocks) == 2
    assert mb.n_id.unique().numel() == mb.n_id.numel()
    reach = _reachable(graph, 3)
    for hop, block in enumerate(reversed(mb.blocks)):
        src, dst = block.edge_index
        assert int(src.max()) < block.num_src and int(dst.max()) < block.num_dst
        assert torch.bincount(dst, minlength=block.num_dst).max() <= 5
        g_src, g_dst = mb.n_id[src], mb.n_id[dst]
        assert bool(reach[g_dst, g_src].all()) and bool((g_src != g_dst).all())
        w = block.edge_weight
        assert w.dtype == torch.float32 and w.numel() == src.numel()
        assert float(w.min()) >= 1 and float(w.max()) <= 4 * 3
        # the block is exactly the op's top-k, visit counts included
        owner, vertex, count = random_walk_top_k(graph.indptr, graph.indices,
                                                 mb.n_id[: block.num_dst], 4, 3, 5, 11, hop)
        assert torch.equal(dst, owner) and torch.equal(g_src, vertex)
        assert torch.equal(w, count.float())
    again = sampler.sample(graph, targets, seed=11)
    assert torch.equal(again.n_id, mb.n_id)
    assert not torch.equal(sampler.sample(graph, targets, seed=12).n_id, mb.n_id)


def _ones_like_weights(block: Block) -> Block:
    return Block(block.edge_index, block.size, block.src_ids,
                 torch.ones(block.num_edges))


@pytest.mark.parametrize("model_cls", [SAGE, GCN, GIN])
def test_unit_weights_equal_the_unweighted_convs(model_cls):
    graph = make_graph()
    torch.manual_seed(0)
    model = model_cls(graph.num_features, graph.num_classes, hidden=8, num_layers=2).eval()
    model.bind_graph(graph)
    mb = RandomWalkSampler(num_layers=2).sample(graph, torch.arange(10), seed=0)
    plain = [Block(b.edge_index, b.size, b.src_ids) for b in mb.blocks]
    x = graph.x[mb.input_nodes]
    torch.testing.assert_close(model(x, [_ones_like_weights(b) for b in mb.blocks]),
                               model(x, plain), rtol=1e-5, atol=1e-6)
    out = model(x, mb.blocks)  # the visit counts change the output
    assert out.shape == (10, graph.num_classes) and torch.isfinite(out).all()
    assert not torch.allclose(out, model(x, plain))


def test_sage_importance_pooling_is_the_weighted_mean():
    torch.manual_seed(0)
    model = SAGE(3, 2, hidden=4, num_layers=1)
    x = torch.randn(4, 3)
    block = Block(torch.tensor([[1, 2, 3, 3], [0, 0, 0, 1]]), (4, 2), torch.arange(4),
                  torch.tensor([1.0, 2.0, 5.0, 3.0]))
    conv = model.convs[0]
    mean0 = (1 * x[1] + 2 * x[2] + 5 * x[3]) / 8
    want = conv.lin_l(torch.stack([mean0, x[3]])) + conv.lin_r(x[:2])
    torch.testing.assert_close(model(x, [block]), want)


def test_gcn_weighted_norm_uses_weighted_degrees():
    block = Block(torch.tensor([[1, 2], [0, 0]]), (3, 1), torch.arange(3),
                  torch.tensor([3.0, 1.0]))
    ei, w = block_gcn_norm(block)
    # in-degree of 0: 3 + 1 + 1 (self loop); out-degrees: 1 -> 3, 2 -> 1, 0 -> 1 (self loop)
    want = torch.tensor([3 / (3 * 5) ** 0.5, 1 / (1 * 5) ** 0.5, 1 / (1 * 5) ** 0.5])
    assert torch.equal(ei, torch.tensor([[1, 2, 0], [0, 0, 0]]))
    torch.testing.assert_close(w, want)


def test_models_that_cannot_weigh_edges_refuse_weighted_blocks():
    graph = make_graph()
    mb = RandomWalkSampler(num_layers=2).sample(graph, torch.arange(4), seed=0)
    x = graph.x[mb.input_nodes]
    with pytest.raises(ValueError, match="GAT learns its own edge weights"):
        GAT(graph.num_features, graph.num_classes, hidden=8, num_layers=2)(x, mb.blocks)
    with pytest.raises(ValueError, match="model.aggr='max' cannot weigh edges"):
        SAGE(graph.num_features, graph.num_classes, aggr="max", hidden=8, num_layers=2)(
            x, mb.blocks)
    gcn = GCN(graph.num_features, graph.num_classes, gcn_norm="graph", hidden=8, num_layers=2)
    gcn.bind_graph(graph)
    with pytest.raises(ValueError, match="use model.gcn_norm=block"):
        gcn(x, mb.blocks)


def test_zero_walk_length_and_bad_seeds_fail_clearly():
    with pytest.raises(ValueError, match="sampler.walk_length must be >= 1"):
        RandomWalkSampler(walk_length=0)
    graph = make_graph()
    with pytest.raises(ValueError, match=r"seeds hold ids in \[-1, 3\]"):
        RandomWalkSampler(num_layers=1).sample(graph, torch.tensor([3, -1]))


@pytest.mark.parametrize("overrides,match", [
    (("strategy=factored", "sampler.walk_length=0"), "sampler.walk_length must be >= 1"),
    (("strategy=data", "model=gat"), "GAT learns its own edge weights"),
    (("strategy=data", "model=gcn", "model.gcn_norm=graph"), "use model.gcn_norm=block"),
    (("strategy=split", "dist.world_size=2"), "strategy=split cannot carry the edge weights"),
])
def test_random_walk_misuse_refused_before_ranks_start(tmp_path, tiny_graph, overrides, match):
    from gnnscale.runner.validate import ConfigError, check_data
    from tests._train import TINY, make_cfg

    base = [o for o in TINY if not o.startswith("sampler.fanouts")]
    cfg = make_cfg(tmp_path, *base, "sampler=random_walk", "sampler.num_layers=2", *overrides)
    with pytest.raises(ConfigError, match=match):
        check_data(cfg, tiny_graph)


def test_random_walk_with_sage_passes_the_checks(tmp_path, tiny_graph):
    from gnnscale.runner.validate import check_data
    from tests._train import TINY, make_cfg

    base = [o for o in TINY if not o.startswith("sampler.fanouts")]
    check_data(make_cfg(tmp_path, *base, "strategy=data", "sampler=random_walk",
                        "sampler.num_layers=2"), tiny_graph)


@pytest.mark.slow
def test_sampler_workers_carry_the_edge_weights(tiny_graph):
    from gnnscale.sampling.workers import SamplerPool

    sampler = RandomWalkSampler(num_layers=2)
    jobs = [(torch.arange(i * 50, i * 50 + 50), i) for i in range(3)]
    with SamplerPool(sampler, tiny_graph, 1, depth=2) as pool:
        for (mb, _), (targets, seed) in zip(pool.map(jobs), jobs, strict=True):
            ref = sampler.sample(tiny_graph, targets, seed)
            assert torch.equal(mb.n_id, ref.n_id)
            for got, want in zip(mb.blocks, ref.blocks, strict=True):
                assert torch.equal(got.edge_index, want.edge_index)
                assert torch.equal(got.edge_weight, want.edge_weight)
