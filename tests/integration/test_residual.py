"""model.residual (Platonov et al.'s residual blocks): the architecture against a dense
reference, the split path against the layer, keyed dropout on sub-blocks, and refusals."""

import pytest
import torch
import torch.nn.functional as F

from gnnscale.errors import ConfigError
from gnnscale.models.gcn import GCN
from gnnscale.models.gin import GIN
from gnnscale.models.sage import SAGE
from gnnscale.sampling.base import Block
from tests.models.test_models import _graph

SPLITTABLE = [(SAGE, {"aggr": "mean"}), (SAGE, {"aggr": "sum"}), (GCN, {"gcn_norm": "graph"}),
              (GIN, {})]


def _model(cls, kw, dropout=0.0, layers=3, **extra):
    torch.manual_seed(0)
    return cls(7, 3, hidden=8, num_layers=layers, dropout=dropout, norm="layer",
               activation="gelu", residual=True, **kw, **extra)


def _dense_reference(model, x, graph, kind):
    """Platonov et al.'s stack written out with dense matrices: input projection, per block
    h + FFN(conv(LN(h))), output norm and projection (dropout off)."""
    n = graph.num_nodes
    src, dst = graph.edge_index()
    adj = torch.zeros(n, n)
    adj[dst, src] = 1.0
    deg = adj.sum(1)
    h = F.gelu(model.in_proj(x))
    for i, conv in enumerate(model.convs):
        z = model.norms[i](h)
        if kind == "gcn":  # D^-1/2 (A + I) D^-1/2, then the conv's linear and bias
            s = (deg + 1).rsqrt()
            c = conv.lin(s[:, None] * (adj + torch.eye(n)) * s[None, :] @ z) + conv.bias
        else:  # SAGE mean: lin_l(mean of neighbours) + lin_r(self)
            c = conv.lin_l((adj / deg.clamp(min=1)[:, None]) @ z) + conv.lin_r(z)
        h = h + model.ffn[i](F.gelu(c))
    return model.out_proj(model.norms[-1](h))


@pytest.mark.parametrize("cls,kw,kind", [(GCN, {"gcn_norm": "graph"}, "gcn"), (SAGE, {}, "sage")])
def test_residual_stack_is_platonov_et_al(cls, kw, kind):
    graph = _graph(n=30, e=120, seed=2)
    n = graph.num_nodes
    model = _model(cls, kw)
    model.bind_graph(graph)
    x = torch.randn(n, 7)
    whole = Block(graph.edge_index(), (n, n), torch.arange(n))
    torch.testing.assert_close(model(x, [whole] * 3), _dense_reference(model, x, graph, kind))
    assert model.widths(7) == [7, 8, 8, 3]
    assert not any(model.reorders(i) for i in range(3))


def _split_forward(model, x, block, parts):
    """inputs, then per layer the partial aggregates over disjoint edge sets summed, update,
    post: what the vertex-cut and offload strategies run."""
    ids = block.src_ids
    h = model.inputs(x, ids)
    for i in range(model.num_layers):
        agg = sum(model.aggregate(i, h, Block(block.edge_index[:, sel], block.size, ids))
                  for sel in parts)
        h = model.post(i, model.update(i, agg, h[: block.num_dst], ids[: block.num_dst]), ids)
    return h


@pytest.mark.parametrize("cls,kw", SPLITTABLE)
def test_split_path_equals_the_layers_with_keyed_dropout(cls, kw):
    graph = _graph(n=40, e=160, seed=1)
    n = graph.num_nodes
    model = _model(cls, kw, dropout=0.3)
    model.bind_graph(graph)
    model.train()
    model.set_dropout_key(7, 1)
    x = torch.randn(n, 7)
    whole = Block(graph.edge_index(), (n, n), torch.arange(n))
    owner = torch.randint(0, 3, (whole.num_edges,), generator=torch.Generator().manual_seed(1))
    parts = [torch.nonzero(owner == q).flatten() for q in range(3)]
    grads = []
    for run in (lambda: model(x, [whole] * 3), lambda: _split_forward(model, x, whole, parts)):
        model.zero_grad()
        out = run()
        out.square().sum().backward()
        grads.append((out.detach(), [p.grad.clone() for p in model.parameters()]))
    torch.testing.assert_close(grads[0][0], grads[1][0], rtol=1e-4, atol=1e-5)
    for a, b in zip(grads[0][1], grads[1][1], strict=True):  # summation order differs
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_residual_refusals():
    with pytest.raises(ValueError, match="norm=layer"):
        SAGE(4, 2, hidden=8, norm="batch", residual=True)
    with pytest.raises(ValueError, match="reorder_update"):
        GCN(4, 2, hidden=8, gcn_norm="graph", reorder_update="true", residual=True)
    graph = _graph()
    n = graph.num_nodes
    model = _model(SAGE, {})
    model.bind_graph(graph)
    assert not model.linear_aggregate and not model.preaggregatable
    whole = Block(graph.edge_index(), (n, n), torch.arange(n))
    with pytest.raises(ValueError, match="recompute"):
        model.aggregate_grad(0, torch.randn(n, 8), whole)
    from gnnscale.strategies.offload.strategy import check_options
    with pytest.raises(ConfigError, match="intermediate=recompute"):
        check_options(2, "inter", "cache", None, model)
    check_options(2, "inter", "auto", None, model)  # auto recomputes: accepted


def test_plain_models_are_unchanged_by_the_option():
    """residual=False builds the same parameters in the same order (same seeds, same runs)."""
    torch.manual_seed(0)
    a = SAGE(7, 3, hidden=8, num_layers=2)
    torch.manual_seed(0)
    b = SAGE(7, 3, hidden=8, num_layers=2, residual=False)
    for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert na == nb and torch.equal(pa, pb)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["data", "split", "factored", "fullgraph", "offload"])
def test_every_strategy_trains_the_residual_stack(tmp_path, strategy):
    """Through the runner on 2 ranks: the option composes, every strategy runs it, and the
    training loss falls."""
    from gnnscale.runner.run import run
    from tests._train import TINY, make_cfg

    tiny = [o for o in TINY if strategy in ("data", "split", "factored") or "batch_size" not in o]
    cfg = make_cfg(tmp_path, *tiny, f"strategy={strategy}", "epochs=3", "dist.world_size=2",
                   "model.residual=true", "model.norm=layer", "model.dropout=0.2")
    hist = run(cfg)["history"]
    assert hist[-1]["train_loss"] < hist[0]["train_loss"], strategy
