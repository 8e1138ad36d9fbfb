"""R-GAT (models/rgat.py): PyG's RGATConv behind the typed input, reading edge features; trains
under strategy=data on the tiny typed graph with edge features, two ranks equal one process,
and the launch checks name what to fix."""

import pytest
import torch

from gnnscale.cache.none import NoCache
from gnnscale.cache.store import typed_inputs
from gnnscale.deps.depcache import DepCache
from gnnscale.distributed.topology import Topology
from gnnscale.errors import ConfigError
from gnnscale.optim.adam import Adam
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.strategies.base import RunContext
from gnnscale.strategies.data.strategy import DataParallel
from gnnscale.tasks.node import NodeTask
from tests import _typed_fns

CPU = Topology(0, 1, 0, 1, torch.device("cpu"))


def test_rgat_reads_edge_features_and_trains_under_data_parallel():
    graph = _typed_fns.make_typed_graph(edge_features=True)
    model = _typed_fns.make_model(graph, "rgat")
    assert model.reads_edge_features and not model.splittable
    assert model.convs[0].lin_edge is not None and model.widths(0) == [8, 8, 3]
    task = NodeTask()
    task.attach(model)
    task.graph = graph
    ctx = RunContext(topo=CPU, graph=graph, model=model, sampler=NeighborSampler([4, 3]),
                     cache_policy=NoCache(), deps=DepCache(), partition=None, seed=0,
                     optim=Adam(lr=0.05), task=task)
    strat = DataParallel(ctx, batch_size=40, prefetch=0)
    strat.setup()
    before = model.convs[0].lin_edge.weight.detach().clone()
    epochs = [strat.train_epoch(e) for e in range(8)]
    assert epochs[0]["bytes_edge_features"] > 0
    assert not torch.equal(model.convs[0].lin_edge.weight, before)  # the features were read
    assert epochs[-1]["train_loss"] < epochs[0]["train_loss"] * 0.8
    metrics = strat.evaluate(64)  # layer-wise, its blocks' edge features attached
    assert 0.0 <= metrics["val_acc"] <= 1.0
    mb = NeighborSampler([4, 3]).sample(graph, torch.arange(4), 0)  # no edge features
    with pytest.raises(ValueError, match="reads edge features but the block carries none"):
        model(typed_inputs(graph, mb.input_nodes), mb.blocks)


def test_launch_takes_rgat_on_a_typed_graph_and_names_what_to_fix(tmp_path):
    from gnnscale.models.schemas import RGATConfig
    from gnnscale.runner.validate import validate
    from tests._train import make_cfg

    typed = ("dataset=hetero_sim", "dataset.scale=0.002", "model=rgat", "logger=none")
    validate(make_cfg(tmp_path, *typed))
    # hetero_sim's edge types carry features of different widths (or none)
    with pytest.raises(ConfigError, match=r"R-GAT reads edge features.*different widths"):
        validate(make_cfg(tmp_path, *typed, "model.edge_dim=auto"))
    with pytest.raises(ConfigError, match=r"model.hidden \(30\) must be a multiple"):
        RGATConfig(hidden=30).check()
    assert "edge-cut" in RGATConfig().why_not_splittable()
