"""sampler=random_walk: PinSAGE neighbourhoods that SAGE and GCN consume, seeded, checked."""

import pytest
import torch

from gnnscale.models.gcn import GCN
from gnnscale.models.sage import SAGE
from gnnscale.sampling.random_walk import RandomWalkSampler
from tests._data_fns import make_graph


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


def test_random_walk_blocks_are_top_k_walk_neighbourhoods():
    graph = make_graph()
    sampler = RandomWalkSampler(num_layers=2, num_walks=4, walk_length=3, top_k=5)
    targets = torch.arange(0, 40, 3)
    mb = sampler.sample(graph, targets, seed=11)
    assert torch.equal(mb.targets, targets) and len(mb.blocks) == 2
    assert mb.n_id.unique().numel() == mb.n_id.numel()
    reach = _reachable(graph, 3)
    for block, visits in zip(mb.blocks, sampler.last_visit_counts):
        src, dst = block.edge_index
        assert int(src.max()) < block.num_src and int(dst.max()) < block.num_dst
        assert torch.bincount(dst, minlength=block.num_dst).max() <= 5
        g_src, g_dst = mb.n_id[src], mb.n_id[dst]
        assert bool(reach[g_dst, g_src].all()) and bool((g_src != g_dst).all())
        assert visits.numel() == src.numel() and int(visits.min()) >= 1
        assert int(visits.max()) <= 4 * 3
    again = sampler.sample(graph, targets, seed=11)
    assert torch.equal(again.n_id, mb.n_id)
    assert not torch.equal(sampler.sample(graph, targets, seed=12).n_id, mb.n_id)


@pytest.mark.parametrize("model_cls", [SAGE, GCN])
def test_sage_and_gcn_consume_random_walk_blocks(model_cls):
    graph = make_graph()
    model = model_cls(graph.num_features, graph.num_classes, hidden=8, num_layers=2)
    model.bind_graph(graph)
    mb = RandomWalkSampler(num_layers=2).sample(graph, torch.arange(10), seed=0)
    out = model(graph.x[mb.input_nodes], mb.blocks)
    assert out.shape == (10, graph.num_classes) and torch.isfinite(out).all()


def test_zero_walk_length_fails_clearly():
    with pytest.raises(ValueError, match="sampler.walk_length must be >= 1"):
        RandomWalkSampler(walk_length=0)


def test_zero_walk_length_refused_before_ranks_start(tmp_path, tiny_graph):
    from gnnscale.runner.validate import ConfigError, check_data
    from tests._train import TINY, make_cfg

    overrides = [o for o in TINY if not o.startswith("sampler.fanouts")]
    cfg = make_cfg(tmp_path, *overrides, "strategy=factored", "sampler=random_walk",
                   "sampler.num_layers=2", "sampler.walk_length=0")
    with pytest.raises(ConfigError, match="sampler.walk_length must be >= 1"):
        check_data(cfg, tiny_graph)
