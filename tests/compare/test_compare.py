"""scripts/compare.py on real tiny runs: the table, JSON and figure; mismatched runs refused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gnnscale.compare.runs import CompareError, Run, assign_labels, check_comparable, load_run
from gnnscale.compare.table import build_rows, default_target, time_to_target

ROOT = Path(__file__).resolve().parents[2]


def _run(path: str, strategy: str, accs: list[float], times: list[float], **cfg) -> Run:
    history = [{"epoch": i, "epoch_time": t, "val_acc": a, "test_acc": a - 0.01,
                "edges_computed": 100.0, "bytes_host_to_rank": 10.0, "peak_memory": 5.0}
               for i, (a, t) in enumerate(zip(accs, times))]
    config = {"dataset": {"preset": "tiny"}, "model": {"hidden": 8}, "optim": {"lr": 0.01},
              "seed": 0, "strategy": {"_target_": f"gnnscale.strategies.{strategy}.X"}, **cfg}
    return Run(path=Path(path), config=config, history=history,
               summary={"metric": "acc", "world_size": 2})


def test_time_to_target_equal_epochs_and_time():
    fast = _run("a", "data", [0.5, 0.8, 0.9], [1.0, 1.0, 1.0])
    slow = _run("b", "fullgraph", [0.6, 0.7], [3.0, 3.0])
    runs = [fast, slow]
    assign_labels(runs)
    assert [r.label for r in runs] == ["data", "fullgraph"]
    assert default_target(runs) == pytest.approx(0.95 * 0.9)
    assert time_to_target(fast, 0.8) == (2.0, 2)
    assert time_to_target(slow, 0.8) == (None, None)
    rows = {r["label"]: r for r in build_rows(runs, 0.8)}
    # equal epochs = 2 (the fewest trained), equal time = 3.0 s (the fastest run's total)
    assert rows["data"]["test_at_equal_epochs"] == pytest.approx(0.79)
    assert rows["fullgraph"]["test_at_equal_epochs"] == pytest.approx(0.69)
    assert rows["data"]["test_at_equal_time"] == pytest.approx(0.89)
    assert rows["fullgraph"]["test_at_equal_time"] == pytest.approx(0.59)
    assert rows["data"]["epoch_time_s"] == 1.0 and rows["fullgraph"]["epoch_time_s"] == 3.0


def test_labels_name_the_settings_that_differ():
    runs = [_run("a", "split", [0.5], [1.0], deps={"_target_": "gnnscale.deps.depcomm.DepComm"}),
            _run("b", "split", [0.5], [1.0], deps={"_target_": "gnnscale.deps.hybrid.Hybrid"}),
            _run("c", "split", [0.5], [1.0], deps={"_target_": "gnnscale.deps.hybrid.Hybrid"})]
    assign_labels(runs)
    assert [r.label for r in runs] == ["split deps=depcomm", "split deps=hybrid",
                                       "split deps=hybrid #2"]


def test_labels_leave_out_groups_the_strategy_does_not_read():
    deps = {"depcomm": {"_target_": "gnnscale.deps.depcomm.DepComm"},
            "hybrid": {"_target_": "gnnscale.deps.hybrid.Hybrid"}}
    runs = [_run("a", "fullgraph", [0.5], [1.0], deps=deps["depcomm"]),
            _run("b", "fullgraph", [0.5], [1.0], deps=deps["hybrid"]),
            _run("c", "offload", [0.5], [1.0], deps=deps["hybrid"])]
    for run, cls in zip(runs, ("FullGraph", "FullGraph", "Offload")):
        run.config["strategy"]["_target_"] = run.config["strategy"]["_target_"][:-1] + cls
    assign_labels(runs)
    # offload composes deps= but never uses it: its label must not pretend otherwise
    assert [r.label for r in runs] == ["fullgraph deps=depcomm", "fullgraph deps=hybrid",
                                       "offload"]


def _folder(path: Path, target: str) -> Path:
    """A finished run folder (results.json) of the strategy class ``target``."""
    run = _run(str(path), "data", [0.5, 0.7], [1.0, 1.0])
    run.config["strategy"] = {"_target_": target}
    path.mkdir(parents=True)
    (path / "results.json").write_text(json.dumps({"config": run.config, "history": run.history,
                                                   "summary": run.summary}))
    return path


def test_compare_labels_a_strategy_from_outside_by_its_name(tmp_path, monkeypatch):
    """``python -m gnnscale.compare`` names a strategy defined outside the package (the layout
    of docs/adding-a-strategy.md: ``<name>/strategy.py``) by its option name, whether its
    package imports here (its declared ``name``) or not (its folder), as gnnscale's own."""
    from gnnscale.compare.cli import main
    from tests.integration.test_outside_strategy import install

    monkeypatch.syspath_prepend(str(install(tmp_path / "pkg")))
    try:
        dirs = [_folder(tmp_path / "a", "my_strategies.replicated.strategy.Replicated"),
                _folder(tmp_path / "b", "gnnscale.strategies.data.DataParallel"),
                _folder(tmp_path / "c", "not_installed.mine.strategy.Mine")]
        assert main([*map(str, dirs), "--out", str(tmp_path / "out")]) == 0
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] == "my_strategies"]:
            del sys.modules[name]
    doc = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert [r["strategy"] for r in doc["rows"]] == ["replicated", "data", "mine"]
    assert [r["label"] for r in doc["rows"]] == ["replicated", "data", "mine"]


def test_mismatched_model_refused_naming_the_key():
    a = _run("a", "data", [0.5], [1.0])
    b = _run("b", "split", [0.5], [1.0])
    b.config["model"] = {"hidden": 16}
    with pytest.raises(CompareError, match=r"model\.hidden"):
        check_comparable([a, b])
    c = _run("c", "split", [0.5], [1.0])
    c.config["seed"] = 1
    with pytest.raises(CompareError, match="seed"):
        check_comparable([a, c])


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> list[Path]:
    """Two real 2-epoch runs of the tiny graph: data-parallel and full-graph, 2 ranks."""
    from gnnscale.runner.run import run
    from tests._train import TINY, make_cfg

    tmp = tmp_path_factory.mktemp("cmp")
    dirs = []
    for strategy in ("data", "fullgraph"):
        extra = [o for o in TINY if not (strategy == "fullgraph" and "batch_size" in o)]
        cfg = make_cfg(tmp, *extra, f"strategy={strategy}", "epochs=2", "dist.world_size=2",
                       "checkpoint=false", run=strategy)
        run(cfg)
        dirs.append(Path(cfg.run_dir))
    return dirs


@pytest.mark.slow
def test_compare_real_runs(two_runs, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "compare.py"),
                           *map(str, two_runs), "--out", str(out),
                           "--hardware", "hongtu_4xa100"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "compare.json").read_text())
    rows = {r["strategy"]: r for r in doc["rows"]}
    assert set(rows) == {"data", "fullgraph"}
    assert doc["equal_epochs"] == 2
    # full-graph computes every edge of both layers each epoch; data-parallel a sample of them
    graph = load_run(two_runs[1]).graph
    assert rows["fullgraph"]["edges_computed"] == 2 * graph["num_edges"]
    assert 0 < rows["data"]["edges_computed"] < rows["fullgraph"]["edges_computed"]
    assert rows["data"]["bytes_host_to_rank"] > 0 and rows["fullgraph"]["bytes_rank_to_rank"] > 0
    assert all(r["bytes_allreduce"] > 0 and r["peak_memory_bytes"] > 0 for r in rows.values())
    assert all(r["modelled_epoch_time_s"] > 0 for r in rows.values())
    assert doc["hardware"] == "hongtu_4xa100" and "modelled" in doc["notes"]
    assert "| data" in (out / "compare.md").read_text()
    assert "(modelled)" in (out / "compare.md").read_text()
    assert (out / "compare.png").stat().st_size > 0


@pytest.mark.slow
def test_compare_refuses_a_different_optimizer(two_runs, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(two_runs[1], other)
    res = json.loads((other / "results.json").read_text())
    res["config"]["optim"]["lr"] = 0.5
    (other / "results.json").write_text(json.dumps(res))
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "compare.py"),
                           str(two_runs[0]), str(other), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 2
    assert "optim.lr" in proc.stderr and not (tmp_path / "o").exists()


def _typed_folder(path: Path, target: str, **bytes_per_epoch: float) -> Path:
    """A finished typed run folder of the strategy class ``target``: 2 epochs reporting
    ``bytes_per_epoch`` (plus paper features and one embedding table of 16-wide rows)."""
    run = _run(str(path), "data", [0.5, 0.7], [1.0, 1.0])
    run.config["strategy"] = {"_target_": target}
    for h in run.history:
        h.update({"bytes_host_to_rank.paper": 8.0, "embedding_rows_held": 100.0,
                  "embedding_bytes": 100 * 16 * 4.0, "embedding_rows_touched": 40.0,
                  "bytes_allreduce": 64.0, **bytes_per_epoch})
    graph = {"num_nodes": 150, "num_edges": 900, "num_features": 0, "num_classes": 3,
             "num_train": 20, "node_types": {"paper": 50, "author": 100},
             "feature_dims": {"paper": 4, "author": 0}, "edge_types": 2}
    path.mkdir(parents=True)
    (path / "results.json").write_text(json.dumps({"config": run.config, "history": run.history,
                                                   "summary": run.summary, "graph": graph}))
    return path


def test_compare_shows_the_bytes_typed_runs_move(tmp_path):
    """Typed runs get a second table: host->rank with each node type's features in it, and
    hidden rows exchanged from the strategy's declared ``exchange_keys``, ``none`` for a
    strategy that exchanges none (data); a store's remote feature rows stay features."""
    from gnnscale.compare.cli import main

    dirs = [_typed_folder(tmp_path / "a", "gnnscale.strategies.data.DataParallel"),
            _typed_folder(tmp_path / "b", "gnnscale.strategies.split.SplitParallel",
                          bytes_shuffled=300.0, bytes_rank_to_rank=7.0,
                          bytes_sample_received=50.0),
            _typed_folder(tmp_path / "c", "gnnscale.strategies.fullgraph.FullGraph",
                          bytes_rank_to_rank=500.0, bytes_host_to_rank=0.0)]
    assert main([*map(str, dirs), "--out", str(tmp_path / "out")]) == 0
    doc = json.loads((tmp_path / "out" / "compare.json").read_text())
    typed = {r["strategy"]: r for r in doc["typed"]}
    assert typed["data"]["bytes_hidden_exchanged"] is None
    assert typed["split"]["bytes_hidden_exchanged"] == 300.0
    assert typed["split"]["bytes_features_rank_to_rank"] == 7.0
    assert typed["split"]["bytes_samples_rank_to_rank"] == 50.0
    assert typed["fullgraph"]["bytes_hidden_exchanged"] == 500.0
    assert typed["fullgraph"]["bytes_features_rank_to_rank"] == 0.0
    assert typed["data"]["bytes_host_to_rank_per_type"] == {"paper": 8.0}
    assert typed["data"]["embedding_bytes_touched_per_rank"] == 40 * 16 * 4
    table = (tmp_path / "out" / "compare.md").read_text()
    assert "of which paper features" in table and "hidden rows exchanged" in table
    data_line = next(line for line in table.splitlines() if line.startswith("| data |")
                     and "none" in line)
    assert "40 of 100" in data_line and "2.56 kB" in data_line
    homogeneous = [_folder(tmp_path / "h1", "gnnscale.strategies.data.DataParallel")]
    assert main([*map(str, homogeneous), "--out", str(tmp_path / "h")]) == 0
    assert "typed" not in json.loads((tmp_path / "h" / "compare.json").read_text())
    assert "hidden rows exchanged" not in (tmp_path / "h" / "compare.md").read_text()
