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
