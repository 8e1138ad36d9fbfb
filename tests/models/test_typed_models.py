"""The typed models on PyG's heterogeneous convs (hsage, hgat, hgt) and their block adapter.

The adapter (models/hetero.py) splits a sampled block by node and edge type: each model's conv
on a full-neighbour block equals PyG's conv run on the whole graph's per-type rows and edges at
the block's destinations; layer-wise evaluation equals the whole-graph forward; fullgraph and
offload (which call ``model.layer``) train them as one process on the whole graph does; the
launcher and the models refuse a homogeneous graph in one line. Training under data and
factored, 1 and 2 ranks, is tests/integration/test_typed_training.py's harness over these models."""

from __future__ import annotations

import pytest
import torch

from gnnscale.cache.store import typed_inputs
from gnnscale.distributed.topology import Topology
from gnnscale.models.hetero import TypedBlock
from gnnscale.sampling.base import Block
from gnnscale.sampling.neighbor import NeighborSampler
from tests import _typed_fns

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny graphs: see conftest

TYPED = ("hsage", "hgat", "hgt")
CPU = Topology(0, 1, 0, 1, torch.device("cpu"))


def test_typed_block_splits_rows_and_edges_by_type_and_gathers_back_in_block_order():
    offsets = torch.tensor([0, 10, 20])  # a: ids 0-9, b: ids 10-19
    # rows: dst b12, a3, b15 | src a7, b11; edges a7->b12 (0: a-b), b11->a3 (1: b-a),
    # a3->b15 (0), b15->a3 (1)
    block = Block(torch.tensor([[3, 4, 1, 2], [0, 1, 2, 1]]), (5, 3),
                  torch.tensor([12, 3, 15, 7, 11]), edge_type=torch.tensor([0, 1, 0, 1]))
    tb = TypedBlock(block, offsets, ("a", "b"), (("a", "x", "b"), ("b", "y", "a")))
    assert tb.rows["a"].tolist() == [1, 3] and tb.rows["b"].tolist() == [0, 2, 4]
    assert tb.num_dst == {"a": 1, "b": 2}
    assert tb.edge_index[("a", "x", "b")].tolist() == [[1, 0], [0, 1]]
    assert tb.edge_index[("b", "y", "a")].tolist() == [[2, 1], [0, 0]]
    assert tb.sizes() == {("a", "x", "b"): (2, 2), ("b", "y", "a"): (3, 1)}
    out = tb.gather({"a": torch.tensor([[30.0]]), "b": torch.tensor([[120.0], [150.0]])}, 1,
                    torch.zeros(1))
    assert out.flatten().tolist() == [120.0, 30.0, 150.0]
    assert tb.gather({"b": torch.ones(2, 1)}, 1, torch.zeros(1)).flatten().tolist() == \
        [1.0, 0.0, 1.0]  # a type without an output: zero rows


def _whole_graph_conv(model, layer: int, h: torch.Tensor, graph) -> torch.Tensor:
    """PyG's conv of ``layer`` on the whole graph's per-type rows and edges (as on a
    HeteroData), every vertex's output in global id order."""
    off = graph.node_type_offset.tolist()
    x = {t: h[off[k]: off[k + 1]] for k, t in enumerate(graph.node_types)}
    ei, kinds = graph.edge_index(), graph.type_per_edge.long()
    edges = {}
    for r, (s, rel, d) in enumerate(graph.edge_types):
        e = ei[:, kinds == r]
        edges[(s, rel, d)] = torch.stack([e[0] - off[graph.node_types.index(s)],
                                          e[1] - off[graph.node_types.index(d)]])
    out = model.convs[layer](x, edges)
    if type(model).__name__ == "HGAT":
        out = {t: out[t] + model.skips[layer][t](x[t]) for t in out}
    if type(model).__name__ == "HGT" and layer == model.num_layers - 1:
        out = {t: model.out_lin(v) for t, v in out.items()}
    return torch.cat([out[t] for t in graph.node_types])


@pytest.mark.parametrize("name", TYPED)
def test_conv_on_a_sampled_block_equals_pyg_on_the_whole_graph(name):
    from gnnscale.evaluation.evaluate import layerwise_logits

    graph = _typed_fns.make_typed_graph()
    model = _typed_fns.make_model(graph, name).eval()
    seeds = torch.tensor([70, 3, 110, 59, 41, 0, 100, 114])  # author, paper, field, ...
    mb = NeighborSampler([-1], with_edge_ids=True).sample(graph, seeds, 0)
    block = mb.blocks[0]
    with torch.no_grad():
        h = model.encode(typed_inputs(graph, torch.arange(graph.num_nodes)))
        for layer in range(model.num_layers):
            want = _whole_graph_conv(model, layer, h, graph)
            got = model.conv(layer, h[mb.n_id], block)
            torch.testing.assert_close(got, want[seeds], rtol=1e-5, atol=1e-6)
            h = torch.relu(want)
    if name == "hgt":  # its relation maps' product is PyG's HeteroLinear's
        from torch_geometric.nn.dense import HeteroLinear

        lin = model.convs[0].k_rel
        x, ptr = torch.randn(30, lin.in_channels), torch.tensor([0, 4, 4, 19] + [30] * (
            lin.num_types - 2))[: lin.num_types + 1]
        torch.testing.assert_close(lin.forward_naive(x, ptr),
                                   HeteroLinear.forward_naive(lin, x, ptr))
    # layer-wise evaluation (chunks of destinations, full neighbourhoods) = the forward on
    # the whole graph as one block
    n = graph.num_nodes
    whole = Block(graph.edge_index(), (n, n), torch.arange(n),
                  edge_type=graph.type_per_edge.long())
    with torch.no_grad():
        want = model(typed_inputs(graph, torch.arange(n)), [whole] * model.num_layers)
    got = layerwise_logits(model, graph, graph.test_idx, torch.device("cpu"), batch_size=16)
    torch.testing.assert_close(got, want[graph.test_idx], rtol=1e-5, atol=1e-6)


def _close(got: list[torch.Tensor], want: list[torch.Tensor]) -> None:
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name,offload", [("hsage", True), ("hgat", False), ("hgt", True)])
def test_fullgraph_and_offload_train_them_as_one_process_on_the_whole_graph(name, offload):
    """One process, keyed dropout on: fullgraph (edge-cut, DepComm) and offload (chunks,
    recomputed layers; hgat's HeteroConv path is hsage's, and offload's set-up probes are the
    slow part) run ``model.layer`` on their blocks; every epoch's loss and gradients equal the
    whole-graph run's (not the parameters: GAT's tiny destination-attention gradients,
    noise-level apart, move Adam by a whole step)."""
    from tests import _fullgraph_typed_fns as T
    from tests import _offload_fns as O

    got = T.strategy_epochs(CPU, [(name, "depcomm", {})])[0]
    ref = T.reference(name)
    assert got["losses"] == pytest.approx(ref["losses"], rel=1e-5)
    for g, w in zip(got["grads"], ref["grads"], strict=True):
        _close(g, w)
    if not offload:
        return
    opts = dict(chunks=3, dedup="inter+intra", reorganize=True, intermediate="recompute")
    got = O.offload_epochs(None, [(name, opts)])[0]
    ref = O.whole_graph_epochs(name)
    assert got["losses"] == pytest.approx(ref["losses"], rel=1e-5)
    for g, w in zip(got["grads"], ref["grads"], strict=True):
        _close(g, w)
    assert got["metrics"]["embedding_rows_held"] == 15  # the featureless type's table


def test_they_refuse_a_homogeneous_graph_and_launch_on_a_typed_one(tmp_path):
    from gnnscale.data.graph import GraphStore
    from gnnscale.errors import ConfigError
    from gnnscale.models.hgt import HGT
    from gnnscale.models.hsage import HSAGE
    from gnnscale.runner.validate import validate
    from tests._train import TINY, make_cfg

    with pytest.raises(ValueError, match=r"typed SAGE trains typed graphs.*has one of each"):
        HSAGE(4, 3, hidden=8).bind_graph(GraphStore.from_edge_index(
            torch.tensor([[0, 1], [1, 0]]), 2, x=torch.zeros(2, 4)))

    one_way = GraphStore.from_typed({"a": 3, "b": 2}, {("a", "x", "b"): torch.tensor([[0, 2],
                                                                                   [1, 0]])},
                                    features={"a": torch.zeros(3, 2), "b": torch.zeros(2, 2)})
    with pytest.raises(ValueError, match=r"model=hgt updates only .* a receive none"):
        HGT(0, 3, hidden=8, heads=2).bind_graph(one_way)
    cfg = make_cfg(tmp_path, *TINY, "model=hgat")
    with pytest.raises(ConfigError, match=r"typed GAT trains typed graphs.*has one of each"):
        validate(cfg)
    validate(make_cfg(tmp_path, "dataset=hetero_sim", "dataset.scale=0.002", "model=hgt",
                      "logger=none"))
