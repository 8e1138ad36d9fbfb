"""``model=to_hetero`` (gnnscale/models/to_hetero.py): a user's homogeneous model converted by
PyG's ``to_hetero``, run in stages per node type and edge type, equals the converted module's
own forward on the whole typed graph; what it cannot run is refused in one line. Under every
strategy on 2 ranks: tests/integration/test_traced_models.py."""

from __future__ import annotations

import pytest
import torch

from gnnscale.cache.store import typed_inputs
from gnnscale.data.graph import GraphStore
from gnnscale.errors import ConfigError
from gnnscale.models.to_hetero import ToHetero
from gnnscale.runner.validate import check_config
from gnnscale.sampling.base import Block
from tests import _typed_fns
from tests._train import make_cfg


def _per_type(graph, h, ei, et):
    off = graph.node_type_offset
    x_dict = {t: h[off[k]:off[k + 1]] for k, t in enumerate(graph.node_types)}
    edges = {}
    for k, e in enumerate(graph.edge_types):
        sel = ei[:, et == k]
        s, d = graph.node_types.index(e[0]), graph.node_types.index(e[2])
        edges[tuple(e)] = torch.stack([sel[0] - off[s], sel[1] - off[d]])
    return x_dict, edges


@pytest.mark.parametrize("target,aggr", [("examples.models.SAGESkip", "sum"),
                                         ("examples.models.SAGEJK", "mean")])
def test_the_stages_equal_the_converted_modules_own_forward(target, aggr):
    """Each stage per node type (that type's copies of the Linear and LayerNorm, a skip's
    rows carried) and per edge type (its own SAGEConv), combined by ``aggr``: the whole
    graph's rows equal PyG's to_hetero module on the per-type rows and edges."""
    graph = _typed_fns.make_typed_graph()
    torch.manual_seed(0)
    model = ToHetero(0, graph.num_classes, target=target, hidden=8, aggr=aggr,
                     kwargs={"hidden": 8, "dropout": 0.0})
    model.bind_graph(graph)
    model.eval()
    n, ei, et = graph.num_nodes, graph.edge_index(), graph.type_per_edge.long()
    block = Block(ei, (n, n), torch.arange(n), edge_type=et)
    x = typed_inputs(graph, torch.arange(n))
    with torch.no_grad():
        out = model(x, [block] * model.num_layers)
        h = model.encode(x)
        ref = model.forward_hetero(*_per_type(graph, h, ei, et))
    off = graph.node_type_offset
    for k, t in enumerate(graph.node_types):
        torch.testing.assert_close(out[off[k]:off[k + 1]], ref[t])
    # every per-type copy is a parameter of the model (the user's own module's are not)
    copies = {n for n, _ in model.named_parameters() if n.startswith("hetero.")}
    assert any("author__writes__paper" in n for n in copies)
    assert not any(n.startswith("homogeneous") for n, _ in model.named_parameters())


@pytest.mark.parametrize("target,match", [
    ("examples.models.MeanPooled", r"model=to_hetero runs MeanPooled in stages, one conv per "
     r"edge type, but MeanPooled's forward at models\.py:\d+ .* pools or mixes rows"),
    ("examples.models.GCNSkip", r"convs\.0 \(GCNConv\) as one bipartite conv per edge type"),
])
def test_what_it_cannot_run_is_refused_in_one_line(target, match):
    with pytest.raises(ValueError, match=match) as err:
        ToHetero(0, 3, target=target, hidden=8)
    assert "\n" not in str(err.value)


def test_a_node_type_no_edge_type_points_to_is_refused_at_binding():
    g = torch.Generator().manual_seed(0)
    graph = GraphStore.from_typed(
        {"paper": 10, "author": 6}, {("author", "writes", "paper"): torch.stack(
            [torch.randint(0, 6, (20,), generator=g), torch.randint(0, 10, (20,), generator=g)])},
        features={"paper": torch.randn(10, 3), "author": torch.randn(6, 2)},
        y={"paper": torch.randint(0, 2, (10,))}, train_idx={"paper": torch.arange(5)},
        name="one-way")
    model = ToHetero(0, 2, target="examples.models.SAGESkip", hidden=8)
    with pytest.raises(ValueError, match=r"node type\(s\) \['author'\] .* reverse edges"):
        model.bind_graph(graph)


def test_a_homogeneous_graph_is_refused_at_binding():
    from tests import _fullgraph_fns as F

    model = ToHetero(0, 2, target="examples.models.SAGESkip", hidden=8)
    with pytest.raises(ValueError, match="trains typed graphs") as err:
        model.bind_graph(F.make_graph())
    assert "\n" not in str(err.value)


def test_the_launcher_takes_it_and_refuses_a_whole_graph_only_model(tmp_path):
    cfg = make_cfg(tmp_path, "dataset=hetero_sim", "model=to_hetero",
                   "model.target=examples.models.SAGESkip", "+model.kwargs.hidden=8",
                   "model.hidden=8", "sampler.fanouts=[5,5]")
    assert check_config(cfg).get("model.num_layers") == 2
    cfg = make_cfg(tmp_path, "dataset=hetero_sim", "model=to_hetero",
                   "model.target=examples.models.MeanPooled", "model.num_layers=1",
                   "sampler.fanouts=[5]")
    with pytest.raises(ConfigError, match="a whole-graph-only model trains on homogeneous"):
        check_config(cfg)
    cfg = make_cfg(tmp_path, "dataset=hetero_sim", "model=to_hetero",
                   "model.target=examples.models.GCNSkip", "sampler.fanouts=[5,5]")
    with pytest.raises(ConfigError, match=r"\(GCNConv\) as one bipartite conv per edge type"):
        check_config(cfg)


@pytest.mark.parametrize("strategy", ["data", "factored", "split", "fullgraph", "offload"])
def test_batch_statistics_run_under_data_and_factored_and_are_refused_by_the_others(
        tmp_path, strategy):
    """A BatchNorm between the convs (copied per node type by to_hetero) normalises over the
    rows a forward holds: the strategies that run whole sampled blocks take it, the others
    refuse it in one line naming the norm."""
    cfg = make_cfg(tmp_path, "dataset=hetero_sim", "model=to_hetero",
                   "model.target=tests._user_models.BatchNormSAGE", "model.hidden=8",
                   "sampler.fanouts=[5,5]", f"strategy={strategy}")
    if strategy in ("data", "factored"):
        assert check_config(cfg).get("model.num_layers") == 2
        return
    with pytest.raises(ConfigError, match="norm normalises over the rows") as err:
        check_config(cfg)
    assert "\n" not in str(err.value)
