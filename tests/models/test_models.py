"""Models on blocks: shapes, GCN normalisation, and block == whole-graph computation."""

import pytest
import torch

from gnnscale.data.graph import GraphStore
from gnnscale.models.gat import GAT
from gnnscale.models.gcn import GCN
from gnnscale.models.gin import GIN
from gnnscale.models.sage import SAGE
from gnnscale.sampling.base import Block


def _graph(n=30, e=120, seed=0):
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=g)
    return GraphStore.from_edge_index(ei, n, symmetrize=True, self_loops="remove")


def _whole_graph_block(graph):
    n = graph.num_nodes
    return Block(graph.edge_index(), (n, n))


@pytest.mark.parametrize("cls", [SAGE, GCN, GAT, GIN])
def test_forward_shapes_and_backward(cls):
    graph = _graph()
    torch.manual_seed(0)
    model = cls(8, 3, hidden=16, num_layers=2, dropout=0.0, **({"heads": 4} if cls is GAT else {}))
    x = torch.randn(graph.num_nodes, 8)
    full = _whole_graph_block(graph)
    # the second block keeps only the first 5 vertices as destinations
    keep = full.edge_index[1] < 5
    last = Block(full.edge_index[:, keep], (graph.num_nodes, 5))
    out = model(x, [full, last])
    assert out.shape == (5, 3)
    out.sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_gcn_on_whole_graph_is_kipf_welling():
    graph = _graph()
    n = graph.num_nodes
    torch.manual_seed(0)
    model = GCN(6, 4, hidden=8, num_layers=1, dropout=0.0)
    x = torch.randn(n, 6)
    a = torch.zeros(n, n)
    src, dst = graph.edge_index()
    a[dst, src] = 1.0
    a += torch.eye(n)
    d = a.sum(1).rsqrt()
    norm = d[:, None] * a * d[None, :]
    lin = model.convs[0].lin.weight
    expected = norm @ (x @ lin.T) + model.convs[0].bias
    got = model(x, [_whole_graph_block(graph)])
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cls", [SAGE, GAT, GIN])
def test_block_with_all_neighbours_equals_whole_graph(cls):
    """A block holding a destination's full neighbourhood gives its whole-graph output."""
    graph = _graph(seed=1)
    torch.manual_seed(0)
    model = cls(5, 2, hidden=8, num_layers=1, dropout=0.0, **({"heads": 2} if cls is GAT else {}))
    x = torch.randn(graph.num_nodes, 5)
    whole = model(x, [_whole_graph_block(graph)])
    targets = torch.tensor([3, 7, 11])
    nbrs = [graph.indices[graph.indptr[t]:graph.indptr[t + 1]] for t in targets]
    extra = torch.cat(nbrs).unique()
    extra = extra[~torch.isin(extra, targets)]
    n_id = torch.cat([targets, extra])
    local = {int(v): i for i, v in enumerate(n_id)}
    src = torch.tensor([local[int(u)] for t, nb in zip(targets, nbrs) for u in nb])
    dst = torch.cat([torch.full((nb.numel(),), i) for i, nb in enumerate(nbrs)])
    block = Block(torch.stack([src, dst]), (n_id.numel(), targets.numel()))
    torch.testing.assert_close(model(x[n_id], [block]), whole[targets], rtol=1e-5, atol=1e-5)


def test_bad_model_values():
    with pytest.raises(ValueError, match="num_layers"):
        SAGE(4, 2, num_layers=0)
    with pytest.raises(ValueError, match="multiple of model.heads"):
        GAT(4, 2, hidden=10, heads=4)
    with pytest.raises(ValueError, match="norm"):
        SAGE(4, 2, norm="group")


def test_gcn_graph_norm_batch_equals_whole_graph():
    """gcn_norm=graph with every neighbour: a batch of targets gets its full-graph outputs."""
    from gnnscale.sampling.neighbor import NeighborSampler

    graph = _graph(seed=2)
    n = graph.num_nodes
    torch.manual_seed(0)
    model = GCN(6, 3, hidden=8, num_layers=2, dropout=0.0, gcn_norm="graph")
    model.bind_graph(graph)
    x = torch.randn(n, 6)
    whole = Block(graph.edge_index(), (n, n), torch.arange(n))
    expected = model(x, [whole, whole])
    targets = torch.tensor([0, 5, 9])
    mb = NeighborSampler([-1, -1]).sample(graph, targets, 0)
    torch.testing.assert_close(model(x[mb.n_id], mb.blocks), expected[targets],
                               rtol=1e-5, atol=1e-5)


# ---- keyed dropout --------------------------------------------------------------------------
def _keyed_mask(seed, epoch, layer, ids, dim=16, p=0.5):
    from gnnscale.models.dropout import keyed_dropout, stream_key

    return keyed_dropout(torch.ones(ids.numel(), dim), p, stream_key(seed, epoch, layer), ids)


def test_mix64_matches_the_python_reference():
    from gnnscale.models.dropout import mix64, mix64_py

    xs = [0, 1, 7, 2**40 + 3, 2**63 - 1, -1, -(2**63)]
    got = [v & (2**64 - 1) for v in mix64(torch.tensor(xs)).tolist()]
    assert got == [mix64_py(x & (2**64 - 1)) for x in xs]


def test_keyed_mask_depends_on_vertex_not_row_position():
    ids = torch.tensor([5, 900, 3, 41, 12345678])
    mask = _keyed_mask(1, 2, 0, ids)
    perm = torch.tensor([3, 0, 4, 1, 2])
    assert torch.equal(_keyed_mask(1, 2, 0, ids[perm]), mask[perm])
    assert torch.equal(_keyed_mask(1, 2, 0, ids[:2]), mask[:2])
    assert set(mask.unique().tolist()) <= {0.0, 2.0}


def test_keyed_mask_changes_with_epoch_layer_and_seed():
    ids = torch.arange(200)
    base = _keyed_mask(0, 0, 0, ids)
    for other in (_keyed_mask(0, 1, 0, ids), _keyed_mask(0, 0, 1, ids), _keyed_mask(1, 0, 0, ids)):
        assert (other != base).float().mean() > 0.3


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_keyed_keep_rate_and_scale(p):
    out = _keyed_mask(3, 4, 1, torch.arange(4000), dim=64, p=p)
    keep = (out > 0).float().mean().item()
    assert abs(keep - (1 - p)) < 0.01
    assert torch.allclose(out[out > 0], torch.tensor(1 / (1 - p)))


@pytest.mark.slow
def test_keyed_mask_is_the_same_in_another_process():
    import subprocess
    import sys

    code = ("import torch; from tests.models.test_models import _keyed_mask; "
            "print(_keyed_mask(7, 3, 1, torch.arange(0, 3000, 7)).flatten().tolist())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    there = torch.tensor(eval(out.stdout))
    assert torch.equal(there, _keyed_mask(7, 3, 1, torch.arange(0, 3000, 7)).flatten())


@pytest.mark.parametrize("cls", [SAGE, GCN, GIN, GAT])
@pytest.mark.parametrize("residual", [False, True])
def test_keyed_dropout_in_the_model_agrees_on_a_sub_block(cls, residual):
    """The rows of a sub-block (full in-neighbourhoods) equal the whole graph's, dropout on
    (residual: Platonov et al.'s stack, input projection and FFN dropout keyed too)."""
    from gnnscale.sampling.neighbor import NeighborSampler

    graph = _graph(seed=3)
    n = graph.num_nodes
    torch.manual_seed(0)
    model = cls(6, 3, hidden=8, num_layers=2, dropout=0.5,
                **({"gcn_norm": "graph"} if cls is GCN else {}),
                **({"residual": True, "norm": "layer"} if residual else {}))
    model.bind_graph(graph)
    model.train()
    model.set_dropout_key(11, 2)
    x = torch.randn(n, 6)
    whole = Block(graph.edge_index(), (n, n), torch.arange(n))
    expected = model(x, [whole, whole])
    targets = torch.tensor([1, 4, 17])
    mb = NeighborSampler([-1, -1]).sample(graph, targets, 0)
    torch.testing.assert_close(model(x[mb.n_id], mb.blocks), expected[targets])
    model.set_dropout_key(11, 3)
    assert not torch.allclose(model(x, [whole, whole]), expected)
    model.set_dropout_key(None)
    assert model.dropout_key is None


def test_keyed_dropout_needs_ids_and_gat_refuses_attention_dropout():
    graph = _graph()
    n = graph.num_nodes
    model = SAGE(4, 2, hidden=8, num_layers=2, dropout=0.5)
    model.set_dropout_key(0, 0)
    with pytest.raises(ValueError, match="global vertex ids"):
        model(torch.randn(n, 4), [_whole_graph_block(graph)] * 2)
    gat = GAT(4, 2, hidden=8, heads=2, num_layers=2, attn_dropout=0.2)
    gat.set_dropout_key(0, 0)
    whole = Block(graph.edge_index(), (n, n), torch.arange(n))
    with pytest.raises(ValueError, match="attn_dropout"):
        gat(torch.randn(n, 4), [whole, whole])


# ---- aggregate / update ---------------------------------------------------------------------
SPLITTABLE = [(SAGE, {"aggr": "mean"}), (SAGE, {"aggr": "sum"}), (GCN, {"gcn_norm": "graph"}),
              (GIN, {})]


def _split_conv(model, layer, x, block, reorder, parts=None):
    """Aggregate over ``parts`` disjoint edge subsets, sum the partials, then update."""
    ids = block.src_ids[: block.num_dst]
    xa = model.transform(layer, x) if reorder else x
    agg = 0
    for sel in parts or [torch.arange(block.num_edges)]:
        agg = agg + model.aggregate(layer, xa, Block(block.edge_index[:, sel], block.size,
                                                     block.src_ids))
    z = xa[: block.num_dst] if reorder else None
    return model.update(layer, agg, x[: block.num_dst], ids, z)


@pytest.mark.parametrize("cls,kw", SPLITTABLE)
@pytest.mark.parametrize("reorder", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_aggregate_plus_update_equals_the_conv(cls, kw, reorder, seed):
    graph = _graph(n=40, e=160, seed=seed)
    n = graph.num_nodes
    torch.manual_seed(seed)
    model = cls(7, 3, hidden=5, num_layers=2, dropout=0.0, **kw)
    model.bind_graph(graph)
    x = torch.randn(n, 7)
    whole = Block(graph.edge_index(), (n, n), torch.arange(n))
    parts = torch.randint(0, 3, (whole.num_edges,), generator=torch.Generator().manual_seed(seed))
    split = [torch.nonzero(parts == q).flatten() for q in range(3)]
    for layer, dim in ((0, 7), (1, 5)):
        xl = x if layer == 0 else torch.randn(n, dim)
        expected = model.conv(layer, xl, whole)
        torch.testing.assert_close(_split_conv(model, layer, xl, whole, reorder), expected)
        torch.testing.assert_close(_split_conv(model, layer, xl, whole, reorder, split), expected)


@pytest.mark.parametrize("cls,kw", SPLITTABLE)
def test_split_gradients_equal_the_conv(cls, kw):
    graph = _graph(n=25, e=90, seed=4)
    n = graph.num_nodes
    torch.manual_seed(4)
    model = cls(6, 4, hidden=8, num_layers=1, dropout=0.0, **kw)
    model.bind_graph(graph)
    x = torch.randn(n, 6)
    whole = Block(graph.edge_index(), (n, n), torch.arange(n))
    grads = []
    for run in (lambda: model.conv(0, x, whole), lambda: _split_conv(model, 0, x, whole, True)):
        model.zero_grad()
        run().square().sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)


def test_reorder_update_setting():
    auto = SAGE(16, 4, hidden=32, num_layers=3, dropout=0.0)
    assert [auto.reorders(i) for i in range(3)] == [False, False, True]
    shrink_first = GCN(64, 4, hidden=8, num_layers=2, dropout=0.0, gcn_norm="graph")
    assert [shrink_first.reorders(i) for i in range(2)] == [True, True]
    assert not GIN(64, 4, hidden=8, num_layers=2, reorder_update=False).reorders(0)
    assert GIN(4, 4, hidden=8, num_layers=2, reorder_update="true").reorders(0)
    with pytest.raises(ValueError, match="reorder_update"):
        SAGE(4, 2, reorder_update="sometimes")


def test_models_that_cannot_be_split_say_why():
    gat = GAT(4, 2, hidden=8, heads=2, num_layers=2)
    assert not gat.splittable and not gat.reorders(0)
    with pytest.raises(ValueError, match="edge-cut partitioner"):
        gat.check_splittable()
    with pytest.raises(ValueError, match="aggr"):
        SAGE(4, 2, aggr="max").check_splittable()
    with pytest.raises(ValueError, match="gcn_norm=graph"):
        GCN(4, 2, gcn_norm="block").check_splittable()


def _edge_wise(model, layer, x, block):
    """The conv through PyG's per-edge message path (the reference for the sparse one)."""
    conv = model.convs[layer]
    if isinstance(model, GCN):
        from gnnscale.models.gcn import block_gcn_norm
        ei, w = model.graph_norm(block) if model.gcn_norm == "graph" else block_gcn_norm(block)
        return conv(x, ei, w)[: block.num_dst]
    return conv((x, x[: block.num_dst]), block.edge_index, size=block.size)


@pytest.mark.parametrize("cls,kw", [(SAGE, {"aggr": "mean"}), (SAGE, {"aggr": "sum"}),
                                    (GCN, {"gcn_norm": "block"}), (GCN, {"gcn_norm": "graph"}),
                                    (GIN, {})])
@pytest.mark.parametrize("shuffle", [False, True])
def test_sparse_conv_equals_the_edge_wise_conv(cls, kw, shuffle):
    """The fused sparse product gives the per-edge path's outputs and input gradients, for
    blocks grouped by destination or not, with destinations that have no edges."""
    graph = _graph(n=40, e=100, seed=3)
    torch.manual_seed(0)
    model = cls(8, 6, hidden=16, num_layers=2, dropout=0.0, **kw)
    model.bind_graph(graph)
    assert model.sparse_conv
    ei = graph.edge_index()
    keep = (ei[1] < 25) & (ei[1] % 7 != 3)  # 25 destinations, some without in-edges
    ei = ei[:, keep]
    if shuffle:
        ei = ei[:, torch.randperm(ei.shape[1], generator=torch.Generator().manual_seed(1))]
    block = Block(ei, (40, 25), src_ids=torch.arange(40))
    assert bool((torch.bincount(ei[1], minlength=25) == 0).any())
    x1 = torch.randn(40, 8, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_(True)
    a, b = model.conv(0, x1, block), _edge_wise(model, 0, x2, block)
    torch.testing.assert_close(a, b)
    a.square().sum().backward()
    b.square().sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad)


def test_attention_and_max_keep_the_edge_wise_path():
    assert not GAT(8, 3, hidden=16, heads=4).sparse_conv
    assert not SAGE(8, 3, aggr="max").sparse_conv
