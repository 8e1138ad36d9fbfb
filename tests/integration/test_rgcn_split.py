"""R-GCN in the split form (models/rgcn.py): its conv equals PyG's RGCNConv on the same
parameters (outputs and gradients; mean and add; with and without bases), and its aggregate
(one slot per relation, the graph's per-(vertex, relation) degrees) adds up over disjoint edge
sets and updates to the same conv on full neighbourhoods."""

import pytest
import torch
import torch_geometric

from gnnscale.cache.store import typed_inputs
from gnnscale.errors import ConfigError
from gnnscale.models.rgcn import RGCN, relation_degrees
from gnnscale.models.schemas import RGCNConfig
from gnnscale.sampling.base import Block
from gnnscale.sampling.neighbor import NeighborSampler
from tests._typed_fns import make_typed_graph

GRAPH = make_typed_graph()


def _model(aggr: str, bases: int) -> RGCN:
    torch.manual_seed(0)
    model = RGCN(0, 3, hidden=8, num_layers=2, dropout=0.0, num_bases=bases, aggr=aggr)
    model.bind_graph(GRAPH)
    return model


@pytest.mark.parametrize("aggr,bases", [("mean", 0), ("mean", 2), ("add", 2)])
def test_conv_is_rgcnconv_on_a_sampled_block(monkeypatch, aggr, bases):
    monkeypatch.setattr(torch_geometric.backend, "use_segment_matmul", False)  # PyG's loop
    model = _model(aggr, bases)
    mb = NeighborSampler([4, 3]).sample(GRAPH, torch.arange(12), 0)
    x = model.encode(typed_inputs(GRAPH, mb.input_nodes)).detach().requires_grad_()
    for layer, block in enumerate(mb.blocks[:1]):
        conv = model.convs[layer]
        params = [x, *conv.parameters()]
        ref = conv((x, x[: block.num_dst]), block.edge_index, block.edge_type)
        want = torch.autograd.grad(ref.square().sum(), params)
        nameless = Block(block.edge_index, block.size, None, edge_type=block.edge_type)
        for b in (block, nameless):  # grouped by destination type / one slot per relation
            out = model.conv(layer, x, b)
            torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
            for g, w in zip(torch.autograd.grad(out.square().sum(), params), want):
                torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


def test_aggregate_adds_up_over_edge_halves_and_updates_to_the_conv():
    model = _model("mean", 2)
    assert model.splittable and model.linear_aggregate and not model.reorders(0)
    mb = NeighborSampler([-1]).sample(GRAPH, torch.arange(0, 115, 3), 0)
    block = mb.blocks[0]
    x = model.encode(typed_inputs(GRAPH, mb.input_nodes)).detach().requires_grad_()
    agg = model.aggregate(0, x, block)
    assert agg.shape == (block.num_dst, model.aggregate_width(0, 8)) == (block.num_dst, 6 * 8)
    dst_ids = block.src_ids[: block.num_dst]
    out = model.update(0, agg, x[: block.num_dst], dst_ids)
    torch.testing.assert_close(out, model.conv(0, x, block), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(model.update(0, agg, x[: block.num_dst]), out)  # no ids: dense
    half = torch.arange(block.num_edges) % 2 == 0
    parts = [model.aggregate(0, x, Block(block.edge_index[:, m], block.size, block.src_ids,
                                         edge_type=block.edge_type[m])) for m in (half, ~half)]
    torch.testing.assert_close(parts[0] + parts[1], agg, rtol=1e-6, atol=1e-6)
    grad = torch.randn_like(agg)
    want, = torch.autograd.grad(agg, x, grad)
    torch.testing.assert_close(model.aggregate_grad(0, grad, block), want)


def test_relation_degrees_count_each_vertex_relation_pair():
    rels = len(GRAPH.edge_types)
    dst = torch.repeat_interleave(torch.arange(GRAPH.num_nodes), GRAPH.in_degree())
    want = torch.bincount(dst * rels + GRAPH.type_per_edge.long(),
                          minlength=GRAPH.num_nodes * rels)
    assert torch.equal(relation_degrees(GRAPH), want)


def test_schema_splits_embedding_input_not_onehot_and_refuses_reordering():
    assert RGCNConfig().splittable and RGCNConfig().why_not_splittable() is None
    onehot = RGCNConfig(featureless="onehot")
    assert not onehot.splittable and "featureless=embedding" in onehot.why_not_splittable()
    with pytest.raises(ConfigError, match="reorder_update"):
        RGCNConfig(reorder_update="true").check()


def test_strategy_built_products_follow_the_slots():
    """The matrices offload (ChunkProducts) and the full-graph overlap (source groups) build
    from edge_weight/edge_slot give R-GCN's aggregate and its gradient."""
    from gnnscale.strategies.fullgraph.overlap import SourceGroups, WeightCache, partial
    from gnnscale.strategies.offload.compute import ChunkProducts

    model = _model("mean", 0)
    mb = NeighborSampler([-1]).sample(GRAPH, torch.arange(0, 115, 4), 0)
    block = mb.blocks[0]
    x = model.encode(typed_inputs(GRAPH, mb.input_nodes)).detach().requires_grad_()
    want = model.aggregate(0, x, block)
    prod = ChunkProducts.build(model, 0, block)
    torch.testing.assert_close(prod.aggregate(model, 0, x), want)
    grad = torch.randn_like(want)
    torch.testing.assert_close(prod.aggregate_grad(model, grad),
                               model.aggregate_grad(0, grad, block))
    src, dst = block.edge_index  # two source groups: even and odd source rows
    groups = SourceGroups.build(src % 2, src // 2, dst, [(block.num_src + 1) // 2,
                                                        block.num_src // 2], block.num_dst)
    mats = WeightCache().get(model, 0, block, groups)
    got = partial(model, 0, mats[0], x[0::2])
    torch.testing.assert_close(partial(model, 0, mats[1], x[1::2], into=got), want)
