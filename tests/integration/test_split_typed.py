"""strategy=split on typed graphs and with edge features: the native split says where each local
edge came from (only when asked), so each rank's local blocks carry the sample's ``e_id`` and
``edge_type``; R-GCN (a featureless type, per-type widths) and models that read edge features
(GAT with edge_dim, GINE) on 2 and 4 gloo ranks equal one process; the launcher accepts them."""

import pytest
import torch

from gnnscale.errors import ConfigError
from gnnscale.ops.split import split_sample as native_split
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.strategies.config import Checked
from gnnscale.strategies.split.splitter import (
    pack_plan,
    split_sample,
    split_sample_all,
    unpack_plan,
)
from tests import _split_fns, _typed_fns, _typed_ranks
from tests._train import make_cfg

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny graphs: see conftest

# targets {0, 1}; inputs {0, 1, 2, 3}; block edges 2->0, 3->0, 1->0, 3->1; rank = id % 2
COUNTS = torch.tensor([2, 4])
EDGES = [torch.tensor([[2, 3, 1, 3], [0, 0, 0, 1]])]
OWNER = torch.tensor([0, 1, 0, 1], dtype=torch.int32)
NO_COSTS = torch.zeros(6, dtype=torch.float64)


@pytest.mark.parametrize("preagg", [False, True])
def test_native_split_gives_local_edge_positions_only_when_asked(preagg):
    for rank, want in ((0, [0, 1, 2]), (1, [3])):
        plain = native_split(COUNTS, EDGES, OWNER, OWNER, 2, rank, preagg, NO_COSTS, 0)
        asked = native_split(COUNTS, EDGES, OWNER, OWNER, 2, rank, preagg, NO_COSTS, 0, 1, True)
        assert len(plain) == 2 + 8 and len(asked) == 2 + 8 + 1
        assert all(map(torch.equal, plain, asked[:10]))  # the plan itself is unchanged
        assert asked[10].tolist() == want


def _graph_edges(graph, e_id: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(source, destination) global ids of CSC positions ``e_id``."""
    dst = torch.searchsorted(graph.indptr, e_id, right=True) - 1
    return graph.indices[e_id].long(), dst


@pytest.mark.parametrize("preagg", [False, True])
def test_local_blocks_carry_the_sample_edges_ids_and_types(preagg):
    """Every local edge's e_id names the graph edge between its endpoints, its edge_type that
    edge's relation; the ranks' edges are the sample's, each once; the plan's wire format
    keeps them; without edge ids asked, the blocks carry none."""
    graph = _typed_fns.make_typed_graph()
    mb = NeighborSampler([4, 3]).sample(graph, torch.arange(0, 20), 5)
    own = _split_fns.scattered_part(graph.num_nodes, 2).int()
    plans = split_sample_all(mb, own, own, 2, preagg=preagg, edge_ids=True)
    for i, whole in enumerate(mb.blocks):
        got = torch.cat([p.layers[i].block.e_id for p in plans])
        assert torch.equal(got.sort().values, whole.e_id.sort().values)
    for rank, plan in enumerate(plans):
        assert pack_plan(plan).equal(pack_plan(split_sample(mb, own, own, 2, rank,
                                                            preagg=preagg, edge_ids=True)))
        for lp, back in zip(plan.layers, unpack_plan(pack_plan(plan)).layers):
            b = lp.block
            src, dst = _graph_edges(graph, b.e_id)
            if not preagg:  # a pre-aggregated edge's source row is a virtual row
                assert torch.equal(b.src_ids[b.edge_index[0]], src)
            assert torch.equal(b.src_ids[b.edge_index[1]], dst)
            assert torch.equal(b.edge_type, graph.type_per_edge[b.e_id].long())
            assert torch.equal(back.block.e_id, b.e_id)
            assert torch.equal(back.block.edge_type, b.edge_type)
    bare = split_sample(mb, own, own, 2, 0, preagg=preagg)
    assert all(lp.block.e_id is None and lp.block.edge_type is None for lp in bare.layers)


def test_the_launcher_accepts_split_with_edge_features_and_typed_graphs(tmp_path):
    from gnnscale.data.metadata import DatasetMeta
    from gnnscale.strategies.config import declared

    cfg = make_cfg(tmp_path, "model=gat", "model.edge_dim=auto", "model.num_layers=2",
                   "strategy=split", "sampler.fanouts=[5,5]")
    meta = DatasetMeta(name="g", num_nodes=10, num_edges=20, num_features=4, num_classes=2,
                       num_train=5, has_features=True, has_labels=True, has_train=True,
                       edge_feature_dims=(3,))
    built = Checked.build(cfg, meta)
    declared(cfg.strategy).check_config(cfg, built)
    declared(cfg.strategy).check_data(cfg, built)
    typed = DatasetMeta.of(_typed_fns.make_typed_graph())
    for extra, refused in (((), False), (("cache=degree", "cache.placement=partitioned"), True)):
        cfg = make_cfg(tmp_path, "model=rgcn", "model.num_layers=2", "strategy=split",
                       "sampler.fanouts=[5,5]", "dist.world_size=2", *extra)
        built = Checked.build(cfg, typed)
        declared(cfg.strategy).check_config(cfg, built)
        if not refused:
            declared(cfg.strategy).check_data(cfg, built)
            continue
        with pytest.raises(ConfigError, match="typed graph.*set cache.placement=replicated"):
            declared(cfg.strategy).check_data(cfg, built)


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 4])
def test_split_trains_typed_graphs_and_edge_features_like_one_process(world):
    """2 ranks (R-GCN, R-GAT, GAT with edge_dim, GINE) and 4 (R-GCN, R-GAT), a scattered
    partition: per step the loss, the summed gradients (the embedding table's sparse rows
    included) and the final parameters equal one process training on the whole mini-batch;
    the edge feature bytes are the local blocks' rows."""
    models = _typed_ranks.PLANS[world]["split"]
    ranks = [r["split"] for r in _typed_ranks.runs(world)]
    for name in models:
        ref = _typed_ranks.reference(_split_fns.typed_reference_steps, name, world)
        for rank in range(world):
            got = ranks[rank][name]
            for step in range(_split_fns.TYPED_STEPS):
                assert got["losses"][step] == pytest.approx(ref["losses"][step], rel=1e-5)
                assert len(got["grads"][step]) == len(ref["grads"][step])
                for a, b in zip(got["grads"][step], ref["grads"][step], strict=True):
                    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
            for a, b in zip(got["params"], ref["params"], strict=True):
                torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
        # the first step's local blocks: together the sample's edges, each once
        for i, want in enumerate(ref["e_ids"]):
            both = torch.cat([ranks[r][name]["e_ids"][i] for r in range(world)])
            assert torch.equal(both.sort().values, want.sort().values), (name, i)
        if name in ("rgcn", "rgat"):
            assert ranks[0][name]["sparse"] == 1  # the featureless type's table
        if name != "rgcn":  # every local edge's row read once per step, 3 floats each
            assert ranks[0][name]["edge_bytes"] > 0
