"""Simple-HGN (models/simplehgn.py): its conv is PyG's GATConv fed each edge's relation
embedding (values and gradients), its outputs are L2-normalised rows, it trains on a tiny
typed graph, and strategy=data on 2 ranks (and factored on 1) equals one process."""

import pytest
import torch

from gnnscale.cache.store import typed_inputs
from gnnscale.distributed.topology import Topology
from gnnscale.errors import ConfigError
from gnnscale.models.schemas import SimpleHGNConfig
from gnnscale.sampling.neighbor import NeighborSampler
from tests import _typed_fns

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny graphs: see conftest

CPU = Topology(0, 1, 0, 1, torch.device("cpu"))


def test_conv_is_gatconv_fed_relation_embeddings_and_outputs_are_unit_rows():
    graph = _typed_fns.make_typed_graph()
    model = _typed_fns.make_model(graph, "simplehgn")
    mb = NeighborSampler(_typed_fns.FANOUTS).sample(graph, torch.arange(12), 0)
    h = model.encode(typed_inputs(graph, mb.input_nodes))
    for i, block in enumerate(mb.blocks):
        src, dst, rel, _ = model.edges(block)
        assert int((src == dst).sum()) == block.num_dst  # one self loop each, relation R
        assert bool((rel[src == dst] == len(graph.edge_types)).all())
        conv, emb = model.convs[i], model.relations[i].weight
        x = h.detach().requires_grad_()
        want = conv((x, x[: block.num_dst]), torch.stack([src, dst]), edge_attr=emb[rel],
                    size=(x.shape[0], block.num_dst))
        w = torch.randn_like(want)
        params = [x, conv.lin.weight, conv.att_src, conv.att_edge, emb]
        want_g = torch.autograd.grad((want * w).sum(), params)
        got = model.conv(i, x, block)
        got_g = torch.autograd.grad((got * w).sum(), params)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        for a, b in zip(got_g, want_g):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
        assert (conv.res is None) == (i == 0)  # node residuals from layer 1 on
        h = model.post(i, got.detach(), None)
    torch.testing.assert_close(h.norm(dim=1), torch.ones(12))


def test_simplehgn_under_factored_on_one_rank_equals_one_process():
    run = _typed_fns.typed_factored_steps(CPU, "shared", "auto", "simplehgn")
    ref = _typed_fns.typed_reference_steps(run["jobs"], run["steps"], "simplehgn")
    for step in range(run["steps"]):
        for slot, loss in run["losses"][step].items():
            assert loss == pytest.approx(ref["losses"][step][slot], rel=1e-5)
    for got, want in zip(run["params"], ref["params"]):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


def test_simplehgn_options_are_checked():
    with pytest.raises(ConfigError, match="model.input_features"):
        SimpleHGNConfig(input_features="some").check()
    with pytest.raises(ConfigError, match="model.node_residual"):
        SimpleHGNConfig(residual=True).check()
    assert SimpleHGNConfig(hidden=64, heads=8, num_layers=3).widths(0, 3) == [64, 512, 512, 3]


def test_keyed_attention_dropout_masks_each_edge_by_its_global_id():
    """Under keyed dropout (full-graph strategies) an edge's attention is dropped by its
    global edge id and a self loop by its destination's id: the same mask whatever order or
    partition a block holds the edges in, so ranks agree with one process."""
    graph = _typed_fns.make_typed_graph()
    model = _typed_fns.make_model(graph, "simplehgn")
    model.train()
    model.convs[0].dropout = 0.5
    model.set_dropout_key(3, 1)
    block = NeighborSampler(_typed_fns.FANOUTS).sample(graph, torch.arange(12), 0).blocks[-1]
    x = torch.randn(block.size[0], model.hidden)
    want = model.conv(0, x, block)
    torch.testing.assert_close(model.conv(0, x, block), want)  # the same key, the same mask
    perm = torch.randperm(block.edge_index.shape[1], generator=torch.Generator().manual_seed(0))
    shuffled = type(block)(block.edge_index[:, perm], block.size, src_ids=block.src_ids,
                           e_id=block.e_id[perm], edge_type=block.edge_type[perm])
    torch.testing.assert_close(model.conv(0, x, shuffled), want, rtol=1e-5, atol=1e-6)
    model.set_dropout_key(3, 2)  # another epoch, another mask
    assert not torch.allclose(model.conv(0, x, block), want)
    model.set_dropout_key(None)
    torch.manual_seed(0)
    assert not torch.allclose(model.conv(0, x, block), want)  # torch's draw: not the keyed one
    no_ids = type(block)(block.edge_index, block.size, edge_type=block.edge_type)
    model.set_dropout_key(3, 1)
    with pytest.raises(ValueError, match="needs blocks that carry e_id and src_ids"):
        model.conv(0, x, no_ids)
