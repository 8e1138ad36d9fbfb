"""Users' own models (model=custom, tests/_user_models.py) under every strategy, the launcher's
one-line checks of their contract, and the model options strategies settle (gcn_norm=auto)."""

from __future__ import annotations

import pytest
import torch

from gnnscale.distributed import spawn
from gnnscale.errors import ConfigError
from gnnscale.runner.validate import check_config
from tests import _custom_fns, _factored_fns, _offload_fns, _user_models
from tests import _fullgraph_fns as F
from tests._model_equality import close, matches, staged_equal, trainers_equal
from tests._train import make_cfg

USER = "model=custom"
TUTORIAL = (USER, "model.target=tests._user_models.CenteredGCN", "model.num_layers=2")
GRAPHCONV = (USER, "model.target=tests._user_models.GraphConvNet", "+model.kwargs.hidden=8")
BASE = ("dataset=synthetic", "dataset.preset=tiny", "sampler.fanouts=[5,5]", "dist.world_size=2")





# ---- the contract, read from the module ---------------------------------------------------------

def test_layer_by_layer_equals_the_users_own_forward():
    graph = F.make_graph()
    for key in sorted(_user_models.LAYER_WISE):
        model = _user_models.wrap(key, graph.num_features, graph.num_classes, F.LAYERS).eval()
        assert model.layer_wise and model.num_layers == F.LAYERS
        torch.testing.assert_close(model.whole_graph(graph.x, graph.edge_index()),
                                   model.net(graph.x, graph.edge_index()))


def test_a_whole_graph_model_runs_on_the_union_of_the_sample_targets_first():
    from gnnscale.models.custom import sample_edges
    from gnnscale.sampling.neighbor import NeighborSampler

    graph = F.make_graph()
    model = _user_models.wrap("centered", graph.num_features, graph.num_classes, 2)
    assert not model.layer_wise
    mb = NeighborSampler([4, 3]).sample(graph, torch.arange(10), 0)
    edges = sample_edges(mb.blocks)
    union = {tuple(e) for b in mb.blocks for e in b.edge_index.t().tolist()}
    assert {tuple(e) for e in edges.t().tolist()} == union and edges.shape[1] == len(union)
    out = model(graph.x[mb.input_nodes], mb.blocks)
    torch.testing.assert_close(out, model.net(graph.x[mb.input_nodes], edges)[:10])
    with pytest.raises(ValueError, match="whole-graph-only"):
        model.layer(0, graph.x, mb.blocks[0])


# ---- launcher checks: one line each --------------------------------------------------------------

@pytest.mark.parametrize("options,match", [
    ({}, "model=custom needs model.target"),
    ({"target": "tests._user_models.Nope"}, "does not import"),
    ({"target": "torch.Tensor"}, "is not an nn.Module class"),
    ({"target": "tests._user_models.GraphConvNet", "kwargs": {"width": 3}},
     "cannot be built with in_channels"),
    ({"target": "tests._user_models.GraphConvNet", "kwargs": {"in_channels": 3}},
     "model.kwargs.in_channels"),
    ({"target": "tests._user_models.CenteredGCN"}, "set model.num_layers"),
    ({"target": "tests._user_models.GraphConvNet", "num_layers": 3}, "has 2 convs"),
])
def test_a_module_that_breaks_the_contract_is_named_in_one_line(options, match):
    from gnnscale.models.schemas import CustomModelConfig

    with pytest.raises(ConfigError, match=match) as err:
        CustomModelConfig(**options).check()
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("overrides,match", [
    ((*GRAPHCONV, "sampler=random_walk", "sampler.num_layers=2"), "not given the edge weights"),
    ((*TUTORIAL, "strategy=split"), "strategy=split runs the model one conv at a time"),
    ((*TUTORIAL, "strategy=fullgraph"), "CenteredGCN is whole-graph-only"),
    ((*TUTORIAL, "strategy=offload"), "use strategy=data or strategy=factored"),
    ((USER, "model.target=tests._user_models.BatchNormGIN", "strategy=fullgraph"),
     "norms.0 normalises over the rows"),
    ((*GRAPHCONV, "strategy=fullgraph", "partitioner=cvc"), "cannot run on a vertex-cut"),
    ((*GRAPHCONV, "strategy=offload", "strategy.intermediate=cache"),
     "strategy.intermediate=recompute"),
])
def test_refused_at_launch_in_one_line(tmp_path, overrides, match):
    walks = "sampler=random_walk" in overrides
    cfg = make_cfg(tmp_path, *[o for o in BASE if not (walks and "fanouts" in o)], *overrides)
    with pytest.raises(ConfigError, match=match) as err:
        check_config(cfg)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("strategy", ["split", "fullgraph", "offload"])
def test_a_layer_wise_model_is_taken_by_the_layer_by_layer_strategies(tmp_path, capsys, strategy):
    cfg = make_cfg(tmp_path, *BASE, *GRAPHCONV, f"strategy={strategy}")
    assert check_config(cfg) == {"model.num_layers": 2}
    assert cfg.model.num_layers == 2
    assert "model.num_layers=2 (GraphConvNet has 2 convs)" in capsys.readouterr().out


@pytest.mark.parametrize("strategy", ["factored"])
def test_a_whole_graph_model_is_taken_by_the_mini_batch_strategies(tmp_path, strategy):
    assert check_config(make_cfg(tmp_path, *BASE, *TUTORIAL, f"strategy={strategy}")) == {}


# ---- item 3: the strategy settles what it needs of the model's schema ---------------------------

@pytest.mark.parametrize("strategy,norm", [("split", "block"), ("fullgraph", "graph"),
                                           ("offload", "graph")])
def test_gcn_norm_auto_is_the_strategys_choice(tmp_path, capsys, strategy, norm):
    cfg = make_cfg(tmp_path, *BASE, "model=gcn", "model.num_layers=2", f"strategy={strategy}")
    assert check_config(cfg) == {"model.gcn_norm": norm}
    assert cfg.model.gcn_norm.value == norm
    assert f"note: strategy={strategy}: model.gcn_norm={norm}" in capsys.readouterr().out


@pytest.mark.parametrize("strategy", ["offload"])
def test_gcn_norm_block_set_by_hand_is_still_refused_on_the_whole_graph(tmp_path, strategy):
    cfg = make_cfg(tmp_path, *BASE, "model=gcn", "model.num_layers=2", "model.gcn_norm=block",
                   f"strategy={strategy}")
    with pytest.raises(ConfigError, match="set model.gcn_norm=graph"):
        check_config(cfg)


# ---- equal to one process ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["user_resgin"])
def test_offload_on_one_rank_equals_the_whole_graph_with_keyed_dropout(name):
    ref = F.reference(name)
    m = _offload_fns.one_epoch(_offload_fns.make_strategy(None, None, name, chunks=3))
    assert m["train_loss"] == pytest.approx(ref["loss"], rel=1e-5)
    close(m["grads"], ref["grads"])


def test_factored_on_one_process_equals_the_reference_whole_graph_model():
    from gnnscale.distributed.topology import Topology

    cpu1 = Topology(0, 1, 0, 1, torch.device("cpu"))
    out = _factored_fns.train_one_epoch(cpu1, "factored", "auto", model="user_centered")
    matches(out, _factored_fns.reference_epoch(1, model="user_centered"), 0)


@pytest.mark.slow
def test_every_strategy_on_two_ranks_equals_one_process():
    """Each user model under fullgraph (depcomm; replication with keyed dropout), offload,
    split, data and factored on 2 ranks: the per-step losses and gradients of one process."""
    ranks = spawn(_custom_fns.every_strategy, 2)
    for name in _custom_fns.LAYER_WISE:
        staged_equal(ranks, name)
    for name in (*_custom_fns.LAYER_WISE, *_custom_fns.WHOLE_GRAPH):
        trainers_equal(ranks, name)
