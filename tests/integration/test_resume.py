"""Honest resume and checks before spawning: changed configs are refused (keys named) or
applied and said, an interrupted real run resumes bit-identically with consistent metrics, a
NaN loss and a failed checkpoint write stop the run non-zero."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from gnnscale.runner import checkpoint
from gnnscale.runner.run import run
from gnnscale.runner.validate import ConfigError, check_config
from tests._train import TINY, make_cfg

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def one_epoch(tmp_path_factory):
    """A finished 1-epoch, 1-rank run to resume from."""
    tmp = tmp_path_factory.mktemp("resume")
    run(make_cfg(tmp, *TINY, "epochs=1", "dist.world_size=1"))
    return tmp


@pytest.mark.parametrize("change, keys", [
    (["optim.lr=0.01"], "optim.lr: 0.003 -> 0.01"),
    (["dist.world_size=2"], "dist.world_size: 1 -> 2"),
    (["model.hidden=16", "seed=3"], "model.hidden: 32 -> 16, seed: 0 -> 3"),
])
def test_resume_refuses_changes_that_break_exactness(one_epoch, change, keys):
    cfg = make_cfg(one_epoch, *TINY, "epochs=2", "dist.world_size=1", "resume=true", *change)
    with pytest.raises(ConfigError) as err:
        check_config(cfg)
    assert keys in str(err.value) and "resume=false" in str(err.value)


def test_resume_applies_and_reports_safe_changes(one_epoch, capsys):
    cfg = make_cfg(one_epoch, *TINY, "epochs=2", "dist.world_size=1", "resume=true",
                   "eval_every=2")
    check_config(cfg)
    out = capsys.readouterr().out
    assert "resume: applying changed settings: epochs: 1 -> 2, eval_every: 1 -> 2" in out


def test_resume_without_a_checkpoint_says_so(tmp_path, capsys):
    check_config(make_cfg(tmp_path, *TINY, "resume=true"))
    assert f"no checkpoint at {tmp_path / 'run' / 'checkpoint.pt'}: training from epoch 0" \
        in capsys.readouterr().out


@pytest.mark.parametrize("override, match", [
    ("model.hidden=0", "model.hidden must be >= 1, got 0"),
    ("dist.timeout_s=0", "dist.timeout_s must lie in"),
])
def test_bad_values_fail_before_any_rank_starts(tmp_path, override, match):
    with pytest.raises(ConfigError, match=match):
        check_config(make_cfg(tmp_path, *TINY, "cache=none", override))


def test_nan_loss_stops_the_run(tmp_path):
    """One rank trains in the launcher: the error itself reaches the caller, traceback and
    all (several ranks report it as RankFailed naming the rank)."""
    cfg = make_cfg(tmp_path, *TINY, "epochs=4", "dist.world_size=1", "optim.lr=1e30")
    with pytest.raises(FloatingPointError, match="train_loss is nan after epoch"):
        run(cfg)


def test_failed_checkpoint_write_names_the_path(tmp_path):
    cfg = make_cfg(tmp_path, *TINY, "epochs=1", "dist.world_size=1")
    (Path(cfg.run_dir) / checkpoint.FILENAME).mkdir(parents=True)  # nothing can replace it
    with pytest.raises(checkpoint.CheckpointError,
                       match=f"cannot write the checkpoint {cfg.run_dir}/checkpoint.pt: Is a "
                             "directory"):
        run(cfg)
    assert not list(Path(cfg.run_dir).glob(".checkpoint.pt.tmp*"))
    assert not (Path(cfg.run_dir) / "metrics.jsonl").read_text()  # no epoch without its state


def _train(tmp_path: Path, run_dir: str, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "train.py", *TINY, "epochs=3", "dist.world_size=2",
           "model.dropout=0.5", f"run_dir={tmp_path / run_dir}",
           f"data_root={tmp_path / 'data'}", "progress=false", *extra]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})


@pytest.mark.slow
def test_run_interrupted_by_sigkill_resumes_bit_identical(tmp_path):
    """The launcher dies by SIGKILL after epoch 0 or later (its ranks follow it); resumed,
    the run ends with the metrics and parameters of an uninterrupted one."""
    full = _train(tmp_path, "full")
    part = _train(tmp_path, "part")
    metrics = tmp_path / "part" / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while not (metrics.exists() and metrics.read_text().count("\n") >= 1):
        assert part.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    part.send_signal(signal.SIGKILL)
    assert part.wait(timeout=30) != 0
    assert full.wait(timeout=180) == 0, full.stdout.read()
    time.sleep(0.5)  # the ranks of the stopped run end within seconds (guard)
    resumed = _train(tmp_path, "part", "resume=true")
    out = resumed.communicate(timeout=180)[0]
    assert resumed.returncode == 0, out
    assert "resumed from" in out
    lines = [json.loads(x) for x in metrics.read_text().splitlines()]
    want = [json.loads(x) for x in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in lines] == [0, 1, 2]
    assert [r["train_loss"] for r in lines] == [r["train_loss"] for r in want]
    a = checkpoint.load(tmp_path / "full" / "checkpoint.pt")["model"]
    b = checkpoint.load(tmp_path / "part" / "checkpoint.pt")["model"]
    for k in a:
        assert torch.equal(a[k], b[k]), k
