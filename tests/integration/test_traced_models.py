"""The models users have, unmodified (examples/models.py, PyG's own classes), traced into
stages (gnnscale/models/trace.py): equal to their own forward, trained under every strategy
equal to one process, and what cannot be staged refused in one line naming the forward's
line."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch_geometric.nn import SAGEConv, TransformerConv

from gnnscale.distributed import spawn
from gnnscale.errors import ConfigError
from gnnscale.models.contract import describe, reads_edges
from gnnscale.models.custom import Custom
from gnnscale.runner.validate import check_config
from tests import _fullgraph_fns as F
from tests import _offload_fns, _split_fns, _traced_fns, _user_models
from tests._model_equality import close, staged_equal, trainers_equal, typed_equal
from tests._train import make_cfg

BASE = ("dataset=synthetic", "dataset.preset=tiny", "sampler.fanouts=[5,5]", "dist.world_size=2")



# ---- the traced form equals the user's own forward ----------------------------------------------

@pytest.mark.parametrize("key", sorted(_user_models.TRACED))
def test_the_staged_form_equals_the_users_own_forward(key):
    graph = F.make_graph()
    model = _user_models.wrap(key, graph.num_features, graph.num_classes, F.LAYERS,
                              graph=graph).eval()
    assert model.contract.traced and model.num_layers == F.LAYERS
    torch.testing.assert_close(model.whole_graph(graph.x, graph.edge_index()),
                               model.net(graph.x, graph.edge_index()))


def test_cross_layer_values_travel_as_rows_beside_the_stage():
    """JK cat over three layers: boundary 2 carries layer 1's output for the JK head beside
    the rows conv 2 reads; a skip carries nothing more than its own rows."""
    graph = F.make_graph()
    jk = _user_models.wrap("t_sage_cat", graph.num_features, graph.num_classes, 3)
    assert jk.widths(graph.num_features) == [graph.num_features, 8, 16, graph.num_classes]
    skip = _user_models.wrap("t_gcnskip", graph.num_features, graph.num_classes, 3)
    assert skip.widths(graph.num_features) == [graph.num_features, 8, 8, graph.num_classes]


def test_the_users_dropout_is_kept_and_keyed():
    """Train mode with a dropout key: the module's own F.dropout calls drop (outputs differ
    from eval), and the same key gives the same masks (a replica's equal its owner's)."""
    graph = F.make_graph()
    model = _user_models.wrap("t_sagejk", graph.num_features, graph.num_classes, 2,
                              dropout=0.5)
    assert len(model.contract.staged.dropouts) == 2
    x, ei = graph.x, graph.edge_index()
    model.train()
    model.set_dropout_key(7, 0)
    a, b = model.whole_graph(x, ei), model.whole_graph(x, ei)
    torch.testing.assert_close(a, b)
    model.set_dropout_key(7, 1)
    assert not torch.allclose(a, model.whole_graph(x, ei))
    assert not torch.allclose(a, model.eval().whole_graph(x, ei))


@pytest.mark.parametrize("name", ["user_t_sagejk", "user_t_gcnskip"])
def test_offload_on_one_rank_equals_the_whole_graph_with_keyed_dropout(name):
    ref = F.reference(name)
    m = _offload_fns.one_epoch(_offload_fns.make_strategy(None, None, name, chunks=3))
    assert m["train_loss"] == pytest.approx(ref["loss"], rel=1e-5)
    close(m["grads"], ref["grads"])


# ---- edge features follow what the forward passes ---------------------------------------------

def test_a_transformer_stack_without_edge_dim_reads_no_edge_features():
    assert not reads_edges(TransformerConv(4, 4))  # edge_attr: Optional, no edge_dim
    assert reads_edges(TransformerConv(4, 4, edge_dim=2))
    plain = describe(__import__("examples.models").models.Transformer(in_channels=4,
                                                                      out_channels=2))
    assert plain.traced and plain.reads_edges == (False, False)
    edged = describe(__import__("examples.models").models.Transformer(
        in_channels=4, out_channels=2, edge_dim=3))
    assert edged.reads_edges == (True, True)


@pytest.mark.parametrize("strategy", ["data", "split", "fullgraph", "offload"])
def test_a_plain_transformer_stack_is_taken_on_a_graph_without_edge_features(tmp_path,
                                                                             strategy):
    cfg = make_cfg(tmp_path, *BASE, "model=custom", "model.target=examples.models.Transformer",
                   f"strategy={strategy}")
    assert check_config(cfg).get("model.num_layers") == 2


# ---- what cannot be staged: one line naming the forward's line ----------------------------------

class _Branchy(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv = SAGEConv(in_channels, out_channels)

    def forward(self, x, edge_index):
        h = self.conv(x, edge_index)
        if h.sum() > 0:
            h = -h
        return h


class _ReadsEdges(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv = SAGEConv(in_channels, out_channels)

    def forward(self, x, edge_index):
        return self.conv(x, edge_index.flip(0))


@pytest.mark.parametrize("module,match", [
    (lambda: __import__("examples.models").models.MeanPooled(in_channels=4, out_channels=2),
     r"models\.py:\d+ `return self\.lin\(h - global_mean_pool\(h, None\)\)` pools or mixes"),
    (lambda: _Branchy(4, 2), r"test_traced_models\.py:\d+ `if h\.sum\(\) > 0:`.*control flow"),
    (lambda: _ReadsEdges(4, 2), r"`return self\.conv\(x, edge_index\.flip\(0\)\)` reads "
     "edge_index outside a message-passing call"),
])
def test_what_cannot_be_staged_is_named_with_its_line(module, match):
    c = describe(module())
    assert not c.layer_wise and not c.traced
    assert "\n" not in c.why_not_layer_by_layer
    assert __import__("re").search(match, c.why_not_layer_wise), c.why_not_layer_wise


@pytest.mark.parametrize("strategy", ["split", "fullgraph", "offload"])
def test_the_launcher_refuses_an_unstageable_model_naming_the_line_and_the_strategies(
        tmp_path, strategy):
    cfg = make_cfg(tmp_path, *BASE, "model=custom", "model.target=examples.models.MeanPooled",
                   "model.num_layers=1", "sampler.fanouts=[5]", f"strategy={strategy}")
    with pytest.raises(ConfigError, match=r"models\.py:\d+ .*use strategy=data or "
                       "strategy=factored") as err:
        check_config(cfg)
    assert "\n" not in str(err.value)


def test_model_dropout_is_refused_for_a_traced_model():
    graph = F.make_graph()
    with pytest.raises(ValueError, match="its own dropout"):
        Custom(graph.num_features, 3, target="examples.models.SAGEJK", dropout=0.5)


# ---- every strategy on 2 ranks equals one process -----------------------------------------------

@pytest.mark.slow
def test_every_strategy_on_two_ranks_equals_one_process():
    """Each traced model under fullgraph (depcomm; replication with keyed dropout), offload,
    split, data and factored on 2 ranks: the per-step losses and gradients of one process."""
    ranks = spawn(_traced_fns.every_strategy, 2)
    for name in _traced_fns.NAMES:
        staged_equal(ranks, name)
        trainers_equal(ranks, name)






# ---- the default fanouts follow the model ------------------------------------------------------

def test_a_two_conv_model_runs_with_the_default_fanouts(tmp_path, capsys):
    cfg = make_cfg(tmp_path, "dataset=synthetic", "dataset.preset=tiny", "model=custom",
                   "model.target=examples.models.GCNSkip")
    check_config(cfg)
    assert list(cfg.sampler.fanouts) == [15, 10]
    assert "note: sampler.fanouts=[15, 10] (the default [15, 10, 5] sized to " \
        "model.num_layers=2" in capsys.readouterr().out


def test_fanouts_the_user_gave_are_kept_and_checked(tmp_path):
    cfg = make_cfg(tmp_path, "dataset=synthetic", "dataset.preset=tiny", "model=custom",
                   "model.target=examples.models.GCNSkip", "sampler.fanouts=[5,5,5]")
    with pytest.raises(ConfigError, match="one fanout per layer"):
        check_config(cfg)


# ---- a trained run behaves like the PyG model it came from -------------------------------------

def _train(tmp_path, *overrides: str, model=None, model_kwargs=None):
    import gnnscale
    from tests._train import TINY

    plain = [o for o in TINY if not (model is not None and o.startswith("model."))]
    return gnnscale.train([*plain, *overrides, "epochs=1", "dist.world_size=1",
                           "progress=false"], model=model, model_kwargs=model_kwargs,
                          run_dir=tmp_path / "r", data_root=tmp_path / "d")


def test_run_model_is_the_users_class_callable_as_a_pyg_model(tmp_path):
    from examples.models import SAGEJK

    run = _train(tmp_path, model=SAGEJK, model_kwargs={"hidden": 8})
    net, g = run.model, run.graph
    assert type(net) is SAGEJK and not net.training
    out = net(g.x, g.edge_index())
    assert out.shape == (g.num_nodes, g.num_classes)
    probs = run.predict(progress=False)["nodes"]["prob"]
    torch.testing.assert_close(torch.as_tensor(probs), out.softmax(-1), rtol=1e-4, atol=1e-5)
    rows, ids = run.embed(progress=False)  # the last hidden layer, in memory
    assert rows.shape == (g.num_nodes, 8) and ids.tolist() == list(range(g.num_nodes))
    assert not list(run.run_dir.glob("embeddings*"))


def test_run_model_of_a_built_in_model_takes_edge_index(tmp_path):
    run = _train(tmp_path)
    g = run.graph
    out = run.model(g.x, g.edge_index())
    assert out.shape == (g.num_nodes, g.num_classes)
    probs = run.predict(progress=False)["nodes"]["prob"]
    torch.testing.assert_close(torch.as_tensor(probs), out.softmax(-1), rtol=1e-4, atol=1e-5)
    rows, _ = run.embed(progress=False)
    assert rows.shape == (g.num_nodes, 32)  # model.hidden=32: layer 0 of 2


@pytest.mark.slow
def test_edge_reading_models_under_split_fullgraph_and_offload_equal_one_process():
    """TransformerConv with edge_dim, GATv2 with edge features and GINE, traced, on 2 ranks
    of a graph with edge features: split's steps, fullgraph's and offload's epochs (keyed
    dropout) equal one process (data and factored: tests/integration/test_edge_features.py)."""
    from tests import _fullgraph_typed_fns as T

    ranks = spawn(_traced_fns.edge_strategies, 2)
    for name in _traced_fns.EDGE_NAMES:
        split = _split_fns.typed_reference_steps(name, 2)
        full, off = T.reference(name), _offload_fns.whole_graph_epochs(name)
        for r in ranks:
            got = r[name]
            assert got["split"]["losses"] == pytest.approx(split["losses"], rel=1e-5), name
            for a, b in zip(got["split"]["grads"], split["grads"], strict=True):
                close(a, b)
            assert got["fullgraph"]["losses"] == pytest.approx(full["losses"], rel=1e-5), name
            for a, b in zip(got["fullgraph"]["grads"], full["grads"], strict=True):
                close(a, b)
            assert got["offload"]["losses"] == pytest.approx(off["losses"], rel=1e-5), name
            for a, b in zip(got["offload"]["grads"], off["grads"], strict=True):
                close(a, b)
            assert got["offload"]["metrics"]["bytes_edge_features"] > 0


def test_appnps_propagation_steps_are_stages_checked_against_the_fanouts(tmp_path):
    """APPNP(K=3) after an MLP: three stages (the teleport's input carried beside them), so
    the sampler's fanouts must have three entries."""
    model = _user_models.wrap("t_appnp", 6, 3, 3)
    assert model.num_layers == 3 and model.widths(6) == [6, 6, 6, 3]
    cfg = make_cfg(tmp_path, *BASE, "model=custom", "model.target=examples.models.APPNPNet",
                   "+model.kwargs.K=3")
    with pytest.raises(ConfigError, match=r"sampler.fanouts has 2 entries.*"
                       "model.num_layers=3") as err:
        check_config(cfg)
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_a_model_converted_by_to_hetero_under_every_strategy_equals_one_process():
    """examples.models.SAGESkip converted by PyG's to_hetero on the tiny typed graph (a
    featureless type, per-type feature widths), its own dropout keyed: data and factored's
    steps, split's, fullgraph's and offload's epochs on 2 ranks equal one process; with a
    BatchNorm between its convs (tests._user_models.BatchNormSAGE) data's and factored's."""
    ranks = spawn(_traced_fns.hetero_strategies, 2)
    for name in _traced_fns.HETERO_NAMES:
        typed_equal(ranks, name)
