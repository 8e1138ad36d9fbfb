"""strategy=fullgraph through the runner, and its refusals of what it cannot run."""

from __future__ import annotations

import pytest
import torch

from gnnscale import registry
from gnnscale.distributed import RankFailed, spawn
from gnnscale.runner.run import run
from gnnscale.runner.validate import ConfigError, check_data
from tests import _fullgraph_fns as F
from tests._train import make_cfg

GCN = ("model=gcn", "model.gcn_norm=graph")
FULL = ("dataset=synthetic", "dataset.preset=tiny", "model.hidden=16", "model.num_layers=2",
        "model.dropout=0.5", "strategy=fullgraph", "eval_batch_size=512", "logger=none",
        "epochs=3")


def _losses(res: dict) -> list[float]:
    return [h["train_loss"] for h in res["history"]]


@pytest.mark.slow
def test_runner_fullgraph_matches_one_process(tmp_path):
    one = run(make_cfg(tmp_path, *FULL, *GCN, "dist.world_size=1", run="one"))
    hybrid = run(make_cfg(tmp_path, *FULL, *GCN, "dist.world_size=2", "deps=hybrid",
                          "deps.costs={t_vertex:0.0,t_edge:0.0,t_comm:1.0}",
                          "deps.memory_cap_mb=0.05", "deps.margin=0", run="hybrid"))
    vcut = run(make_cfg(tmp_path, *FULL, *GCN, "dist.world_size=2", "partitioner=cvc", run="cvc"))
    plain = run(make_cfg(tmp_path, *FULL, *GCN, "dist.world_size=2", "partitioner=cvc",
                         "strategy.overlap=false", "strategy.ring=true", run="cvc-plain"))
    for res in (hybrid, vcut, plain):
        assert _losses(res) == pytest.approx(_losses(one), rel=1e-4)
        assert res["summary"]["final_test_acc"] == pytest.approx(
            one["summary"]["final_test_acc"], abs=2e-3)
    last = hybrid["history"][-1]
    for key in ("bytes_forward", "bytes_backward", "edges_computed", "vertex_updates",
                "edge_redundancy", "replicated_rows", "cached_feature_bytes", "edge_skew",
                "plan_time", "peak_memory"):
        assert key in last, key
    assert last["bytes_forward"] > 0 and last["cached_feature_bytes"] > 0
    assert last["edge_redundancy"] > 1.0  # replicated rows recompute edges


@pytest.mark.slow
def test_binary_task_reports_and_selects_rocauc_on_every_full_graph_path(tmp_path):
    """fullgraph and offload evaluate their own forward: on a two-class graph they report
    ROC-AUC like the layer-wise evaluation and select by it, equal on 1 and 2 ranks."""
    binary = ("dataset.num_classes=2", "eval_every=1")
    one = run(make_cfg(tmp_path, *FULL, *GCN, *binary, "dist.world_size=1", run="one"))
    two = run(make_cfg(tmp_path, *FULL, *GCN, *binary, "dist.world_size=2", run="two"))
    off = run(make_cfg(tmp_path, *FULL, *GCN, *binary, "dist.world_size=2", "strategy=offload",
                       run="offload"))
    for res in (one, two, off):
        assert res["summary"]["metric"] == "rocauc"
        assert all("val_rocauc" in h and "test_rocauc" in h for h in res["history"])
        assert [h["val_rocauc"] for h in res["history"]] == pytest.approx(
            [h["val_rocauc"] for h in one["history"]], abs=1e-6)


def _check(tmp_path, *overrides: str) -> None:
    cfg = make_cfg(tmp_path, *FULL, *overrides)
    check_data(cfg, registry.build(cfg.dataset).load())


@pytest.mark.parametrize("overrides,match", [
    (("partitioner=cvc", "deps=depcache", *GCN), "deps=depcomm only"),
    (("partitioner=oec", "deps=hybrid", *GCN), "deps=depcomm only"),
    (("partitioner=cvc", "model=gat"), "edge-cut"),
    (("model=gcn", "model.gcn_norm=block"), "model.gcn_norm=graph"),
    (("deps=hybrid", "deps.memory_cap_mb=0.00001", *GCN), "less than one replicated feature row"),
])
def test_refused_before_training(tmp_path, overrides, match):
    with pytest.raises(ConfigError, match=match):
        _check(tmp_path, "dist.world_size=2", *overrides)


def test_accepted_combinations(tmp_path):
    for overrides in (("deps=hybrid", *GCN), ("partitioner=random", "deps=depcache", "model=gat"),
                      ("partitioner=cvc", *GCN), ("partitioner=hvc", "model=sage"),
                      ("partitioner=oec", "strategy.ring=true", *GCN),
                      ("partitioner=cvc", "strategy.overlap=false", *GCN)):
        _check(tmp_path, "dist.world_size=2", *overrides)


def test_overlap_is_the_default(tmp_path):
    """The fastest path is the default: overlapped exchanges (docs/strategies/fullgraph.md,
    "Overlap on against off"), for a composed config and for the class built directly."""
    import inspect

    from gnnscale.strategies.fullgraph.strategy import FullGraph

    cfg = make_cfg(tmp_path, *FULL, *GCN, "dist.world_size=2")
    assert cfg.strategy.overlap is True
    assert inspect.signature(FullGraph).parameters["overlap"].default is True


@pytest.mark.slow
def test_book_for_another_number_of_parts_is_refused():
    with pytest.raises(RankFailed, match="has 3 parts but 2 are needed"):
        spawn(F.setup_with_book, 2, 3, timeout_s=60.0)


def test_one_rank_trains_on_the_whole_graph():
    """world_size=1 is plain full-batch training: the reference itself."""
    res = F.strategy_epochs(None, 1)
    ref = F.reference("gcn")
    assert res["loss"] == pytest.approx(ref["loss"], rel=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(res["params"], ref["params"]))
