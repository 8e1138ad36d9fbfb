"""End to end through the runner: metrics, accuracy, checkpoint/resume, failures, wandb."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from gnnscale import registry
from gnnscale.distributed import RankFailed
from gnnscale.runner import checkpoint
from gnnscale.runner.run import run
from tests._train import TINY, act_when_training, descendants, make_cfg

pytestmark = pytest.mark.slow  # multi-rank / subprocess tests: the slow tier

METRICS = ("epoch_time", "sample_time", "load_time", "compute_time", "comm_time",
           "bytes_host_to_rank", "bytes_rank_to_rank", "cache_hit_rate", "edges_computed",
           "nodes_loaded", "train_loss", "val_acc", "test_acc", "peak_memory")


def test_two_ranks_train_and_report(tmp_path):
    cfg = make_cfg(tmp_path, *TINY, "epochs=3", "dist.world_size=2")
    res = run(cfg)
    run_dir = Path(cfg.run_dir)
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in lines] == [0, 1, 2]
    for key in METRICS:
        assert key in lines[-1], key
    assert lines[-1]["bytes_host_to_rank"] > 0 and lines[-1]["edges_computed"] > 0
    saved = json.loads((run_dir / "results.json").read_text())
    assert saved["summary"] == res["summary"]
    phases = saved["startup"]  # where the run's time went, launcher and rank 0
    for key in ("validate", "ranks_start", "dataset", "model_build",
                "strategy_setup", "epochs", "evaluation", "write_results"):
        assert phases[key] >= 0, key
    assert phases["epochs"] == pytest.approx(sum(r["epoch_time"] for r in lines), rel=0.2)
    chance = 1.0 / registry.build(cfg.dataset).load().num_classes
    assert res["summary"]["final_test_acc"] > chance + 0.2
    assert lines[-1]["train_loss"] < lines[0]["train_loss"]


def test_resume_equals_uninterrupted(tmp_path):
    full = run(make_cfg(tmp_path, *TINY, "epochs=2", "dist.world_size=2", "model.dropout=0.5",
                        run="full"))
    run(make_cfg(tmp_path, *TINY, "epochs=1", "dist.world_size=2", "model.dropout=0.5",
                 run="split"))
    resumed = run(make_cfg(tmp_path, *TINY, "epochs=2", "dist.world_size=2",
                           "model.dropout=0.5", "resume=true", run="split"))
    for a, b in zip(full["history"], resumed["history"]):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-6)
        assert a.get("val_acc") == b.get("val_acc")
    pa = checkpoint.load(tmp_path / "full" / "checkpoint.pt")["model"]
    pb = checkpoint.load(tmp_path / "split" / "checkpoint.pt")["model"]
    for k in pa:
        torch.testing.assert_close(pa[k], pb[k])


def test_train_py_says_a_rank_failure_in_one_error_not_the_launchers_stack(tmp_path):
    """From the command line a failed rank is ``error: rank N failed first ...`` (the rank's
    own traceback inside it) and status 1, without Hydra's report of the launcher's stack."""
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "train.py", *TINY, "dist.world_size=2",
                           "sampler.weighted=true", "epochs=1", "progress=false",
                           f"hydra.run.dir={tmp_path / 'r'}", f"data_root={tmp_path / 'd'}"],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert re.search(r"(?m)^error: rank \d failed first", proc.stderr), proc.stderr[-3000:]
    assert "no edge_weight" in proc.stderr
    assert "Error executing job" not in proc.stderr and "HYDRA_FULL_ERROR" not in proc.stderr


def test_error_inside_a_rank_ends_the_run(tmp_path):
    # the tiny graph has no edge weights: every rank's sampler raises while training
    cfg = make_cfg(tmp_path, *TINY, "dist.world_size=2", "sampler.weighted=true")
    start = time.monotonic()
    with pytest.raises(RankFailed, match="no edge_weight"):
        run(cfg)
    assert time.monotonic() - start < 120


def test_killed_rank_ends_the_run(tmp_path):
    """SIGKILL one rank mid-run: the launcher raises naming it, nobody hangs (in this process,
    through its warm fork server; train.py turns the error into a non-zero status)."""
    cfg = make_cfg(tmp_path, *TINY, "epochs=200", "dist.world_size=2", "dist.timeout_s=60")
    seen: dict = {}

    def kill(ranks: list[int]) -> None:
        seen["ranks"] = ranks
        if len(ranks) == 2:
            os.kill(ranks[-1], signal.SIGKILL)

    watcher = act_when_training(Path(cfg.run_dir), kill)
    start = time.monotonic()
    with pytest.raises(RankFailed) as err:
        run(cfg)
    watcher.join(timeout=5)
    assert len(seen["ranks"]) == 2, seen
    # the killed rank is named first, its peer's broken collective after it
    assert str(err.value).startswith("rank 1 failed first (killed by signal SIGKILL)"), \
        str(err.value)
    assert time.monotonic() - start < 210


def test_wandb_offline_run_files(tmp_path):
    """Two runs in one process: each writes wandb's files in its own folder (the folders a
    run chooses for wandb's cache and config are unset after it, not kept for the next run),
    the caller's environment is as it was, and no wandb process is left."""
    env = {k: v for k, v in os.environ.items() if k.startswith("WANDB_")}
    for name in ("a", "b"):
        cfg = make_cfg(tmp_path, *TINY, "epochs=1", "dist.world_size=1", "logger=wandb",
                       run=name)
        run(cfg)
        runs = list((Path(cfg.run_dir) / "wandb").glob("offline-run-*"))
        assert runs and any(runs[0].glob("*.wandb"))
    assert {k: v for k, v in os.environ.items() if k.startswith("WANDB_")} == env
    left = [p for p in descendants(os.getpid())
            if "wandb-core" in Path(f"/proc/{p}/cmdline").read_text(errors="replace")]
    assert left == [], left


def test_cache_changes_traffic_not_training(tmp_path):
    """A partitioned presample cache moves fewer host bytes and trains exactly the same."""
    base = run(make_cfg(tmp_path, *TINY, "epochs=1", "dist.world_size=2", run="none"))
    cached = run(make_cfg(tmp_path, *TINY, "epochs=1", "dist.world_size=2", "cache=presample",
                          "cache.ratio=0.3", "cache.placement=partitioned", run="cached"))
    a, b = base["history"][-1], cached["history"][-1]
    assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-6)
    assert a["val_acc"] == b["val_acc"]
    assert b["cache_hit_rate"] > 0.3 and b["bytes_rank_to_rank"] > 0
    assert b["bytes_host_to_rank"] < a["bytes_host_to_rank"]
    assert b["bytes_host_to_rank"] + b["bytes_rank_to_rank"] <= a["bytes_host_to_rank"]
