"""Edge features read by models (GAT's edge_dim, GINE, a user's GATv2Conv with edge_dim):
gathered by the sampled blocks' edge ids under strategy=data and factored, counted, passed to
the convs in training and in layer-wise evaluation; refused in one line where they cannot be."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.nn import GATv2Conv, GINEConv

from gnnscale.cache.edges import EdgeFeatures
from gnnscale.data.metadata import DatasetMeta
from gnnscale.distributed import spawn
from gnnscale.distributed.topology import Topology
from gnnscale.errors import ConfigError
from gnnscale.evaluation.evaluate import layerwise_logits
from gnnscale.models.contract import reads_edges
from gnnscale.runner.run import run
from gnnscale.sampling.base import Block
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.strategies.config import Checked
from tests import _data_fns, _edge_fns, _factored_fns
from tests._train import make_cfg

CPU1 = Topology(0, 1, 0, 1, torch.device("cpu"))


def _matches(trainer: dict, ref: dict, t: int) -> None:
    assert len(trainer["losses"]) == len(ref["losses"]) == 3
    for step, loss in enumerate(trainer["losses"]):
        assert loss == pytest.approx(ref["losses"][step][t], rel=1e-5)
        for got, want in zip(trainer["grads"][step], ref["grads"][step], strict=True):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
    for got, want in zip(trainer["params"], ref["params"], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


def test_the_contract_reads_which_convs_take_edge_features():
    assert reads_edges(GATv2Conv(4, 4, edge_dim=3))
    assert not reads_edges(GATv2Conv(4, 4))  # edge_attr optional and unused: none given
    assert reads_edges(GINEConv(torch.nn.Linear(4, 4), edge_dim=3))
    graph = _data_fns.graph_for("user_gatv2edge")
    model = _data_fns.make_model(graph, "user_gatv2edge")
    assert model.reads_edge_features and model.contract.reads_edges == (True, True)
    assert not _data_fns.make_model(graph, "user_gatv2").reads_edge_features


@pytest.mark.parametrize("name", _data_fns.EDGE_MODELS)
def test_the_convs_read_the_blocks_edge_features(name):
    """The output moves with the edge features; a block without them is refused in one line;
    layer-wise evaluation passes them (equal to the model on whole-graph blocks)."""
    graph = _data_fns.graph_for(name)
    model = _data_fns.make_model(graph, name).eval()
    n = graph.num_nodes
    whole = Block(graph.edge_index(), (n, n), torch.arange(n), edge_attr=graph.edge_attr)
    out = model(graph.x, [whole] * model.num_layers)
    moved = Block(whole.edge_index, whole.size, whole.src_ids, edge_attr=graph.edge_attr * 2)
    assert not torch.allclose(out, model(graph.x, [moved] * model.num_layers))
    with pytest.raises(ValueError, match="reads edge features but the block carries none"):
        model(graph.x, [Block(whole.edge_index, whole.size, whole.src_ids)] * 2)
    nodes = torch.arange(200, 300)
    got = layerwise_logits(model, graph, nodes, torch.device("cpu"), batch_size=64)
    torch.testing.assert_close(got, out[nodes], rtol=1e-4, atol=1e-5)


def test_edge_rows_follow_the_edge_ids_and_are_counted():
    graph = _data_fns.graph_for("gine")
    mb = NeighborSampler([4, 3], with_edge_ids=True).sample(graph, torch.arange(8), 1)
    edges = EdgeFeatures(graph)
    edges.attach(mb.blocks)
    for b in mb.blocks:
        torch.testing.assert_close(b.edge_attr, graph.edge_attr[b.e_id])
        assert b.to("cpu").edge_attr is not None
    assert edges.epoch_stats() == {"bytes_edge_features": mb.num_edges * 3 * 4.0}
    with pytest.raises(ValueError, match="carries no edge ids"):
        EdgeFeatures(graph).attach(NeighborSampler([4]).sample(graph, torch.arange(8), 1).blocks)
    with pytest.raises(ValueError, match="the graph has none"):
        EdgeFeatures(_data_fns.make_graph())


@pytest.mark.parametrize("kind,name", [("data", "gat_edge"), ("factored", "user_gatv2edge")])
def test_one_rank_equals_one_process_with_edge_features(kind, name):
    """The strategy asks the sampler for edge ids and gathers their rows: one rank's steps
    equal one process feeding graph.edge_attr[e_id]; the bytes are reported."""
    out = _factored_fns.train_one_epoch(CPU1, kind, "auto", model=name)
    _matches(out, _factored_fns.reference_epoch(1, model=name), 0)
    assert out["metrics"]["bytes_edge_features"] > 0


@pytest.mark.slow
def test_two_ranks_equal_one_process_with_edge_features():
    """data on 2 ranks, factored with a sampler rank (shared queue, fixed routes, and routes
    with switching: the jobs carry edge ids, whoever trains gathers the rows) equal one
    process, step by step."""
    ranks = spawn(_edge_fns.edge_strategies, 2)
    for name in _data_fns.EDGE_MODELS:
        two, one = (_factored_fns.reference_epoch(t, model=name) for t in (2, 1))
        for rank, r in enumerate(ranks):
            _matches(r[name]["data"], two, rank)
        for queue in ("shared", "routes"):
            trainers = [r[name][queue] for r in ranks if r[name][queue]["trainer"]]
            assert len(trainers) == 1
            got = trainers[0]
            if queue == "shared":  # its steps are recorded (job losses, reduced gradients)
                got = {**got, "losses": [loss for _, loss in got["record"]["losses"]],
                       "grads": got["record"]["grads"]}
            _matches(got, one, 0)
            assert trainers[0]["metrics"]["bytes_edge_features"] > 0
    one = _factored_fns.reference_epoch(1, model="gat_edge")
    assert any(r["switching"]["trained"] for r in ranks if not r["switching"]["trainer"])
    for r in ranks:  # switching: every rank's reduced step gradients and parameters
        for got_step, want_step in zip(r["switching"]["record"]["grads"], one["grads"],
                                       strict=True):
            for got, want in zip(got_step, want_step, strict=True):
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
        for got, want in zip(r["switching"]["params"], one["params"], strict=True):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


def _meta(edge_dims: tuple[int, ...]) -> DatasetMeta:
    return DatasetMeta(name="g", num_nodes=10, num_edges=20, num_features=4, num_classes=2,
                       num_train=5, has_features=True, has_labels=True, has_train=True,
                       edge_feature_dims=edge_dims)


@pytest.mark.parametrize("overrides,dims,match", [
    (("strategy=data", "sampler=random_walk"), (3,), "sampler=random_walk"),
    (("strategy=data",), (), "dataset g has none"),
    (("strategy=factored", "model.edge_dim=5"), (3,), "edge_dim=5, but dataset g's edge"),
])
def test_the_launcher_refuses_what_cannot_read_edge_features(tmp_path, overrides, dims, match):
    from gnnscale.strategies.config import declared

    hops = "sampler.num_layers=2" if "sampler=random_walk" in overrides else \
        "sampler.fanouts=[5,5]"
    cfg = make_cfg(tmp_path, "model=gat", "model.edge_dim=auto", "model.num_layers=2",
                   *overrides, hops)
    cls = declared(cfg.strategy)
    built = Checked.build(cfg, _meta(dims))
    with pytest.raises(ConfigError, match=match):
        cls.check_config(cfg, built)
        cls.check_data(cfg, built)


def test_model_schemas_check_edge_dim():
    from gnnscale.models.schemas import GATConfig, GINEConfig

    for bad in (0, "wide", True):
        with pytest.raises(ConfigError, match="model.edge_dim must be auto"):
            GATConfig(edge_dim=bad).check()
    with pytest.raises(ConfigError, match="model=gine reads edge features"):
        GINEConfig(edge_dim=None).check()
    assert GATConfig(edge_dim="auto").edge_inputs(3) == {"edge_dim": 3}
    assert GATConfig().edge_inputs(3) == {} and not GATConfig().reads_edge_features
    with pytest.raises(ConfigError, match="the graph has none"):
        GINEConfig().edge_inputs(0)


@pytest.mark.parametrize("overrides", [
    ("model=gat", "model.edge_dim=auto", "model.heads=2", "model.hidden=8"),
    ("model=custom", "model.target=tests._user_models.GATv2EdgeNet", "+model.kwargs.edge_dim=auto"),
])
def test_edge_dim_auto_is_the_datasets_width(tmp_path, overrides):
    from gnnscale.strategies.base import build_model
    from gnnscale.tasks.node import NodeTask

    graph = _data_fns.graph_for("gine")
    cfg = make_cfg(tmp_path, *overrides, "model.num_layers=2", "sampler.fanouts=[4,3]")
    model = build_model(cfg, graph, NodeTask())
    assert model.reads_edge_features
    convs = model.net.convs if hasattr(model, "net") else model.convs
    assert all(c.lin_edge.in_channels == _data_fns.EDGE_DIM for c in convs)
    with pytest.raises(ConfigError, match="the graph has none"):
        build_model(cfg, _data_fns.make_graph(), NodeTask())


@pytest.mark.slow
def test_gat_reads_edge_features_through_the_runner(tmp_path):
    """train.py's path: dataset=custom with edge_attr, model=gat model.edge_dim=auto (the
    dataset's width), strategy=data: trains, evaluates, reports the edge feature bytes."""
    g = np.random.default_rng(0)
    n, e = 120, 600
    path = tmp_path / "g.npz"
    np.savez(path, edge_index=g.integers(0, n, (2, e)), x=g.standard_normal((n, 6), np.float32),
             y=g.integers(0, 3, n), edge_attr=g.standard_normal((e, 2), np.float32),
             train_idx=np.arange(80), val_idx=np.arange(80, 100), test_idx=np.arange(100, 120))
    out = run(make_cfg(tmp_path, "dataset=custom", f"dataset.path={path}", "model=gat",
                       "model.edge_dim=auto", "model.hidden=8", "model.heads=2",
                       "model.num_layers=2", "sampler.fanouts=[4,4]", "strategy=data",
                       "strategy.batch_size=40", "epochs=1", "logger=none"))
    last = out["history"][-1]
    assert last["bytes_edge_features"] > 0 and "test_acc" in last
