"""Files, round three (issue 39): a killed phase leaves nothing behind and overwrites nothing
good; every field of every file is checked (checkpoints, meta.json, link splits, edge
weights), each refusal one line naming the file and the field."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from gnnscale.errors import UserError
from gnnscale.runner import checkpoint
from gnnscale.runner.run import run
from gnnscale.runner.validate import validate
from tests._train import TINY, make_cfg

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _wait_for(predicate, proc: subprocess.Popen, deadline_s: float = 120.0):
    end = time.monotonic() + deadline_s
    while True:
        found = predicate()
        if found:
            return found
        assert proc.poll() is None, f"exited {proc.returncode} before the moment to kill it"
        assert time.monotonic() < end, "the moment to kill never came"
        time.sleep(0.002)


@pytest.fixture(scope="module")
def one_epoch(tmp_path_factory) -> Path:
    """A finished 1-epoch, 1-rank run (its run folder and data beside it)."""
    tmp = tmp_path_factory.mktemp("hardening")
    run(make_cfg(tmp, *TINY, "epochs=1", "dist.world_size=1"))
    return tmp


def _resume_cfg(base: Path, tmp_path: Path, edit) -> object:
    """A resume of a copy of ``one_epoch``'s run whose checkpoint ``edit(state)`` changed."""
    run_dir = tmp_path / "run"
    shutil.copytree(base / "run", run_dir)
    path = run_dir / checkpoint.FILENAME
    state = checkpoint.load(path)
    edit(state)
    torch.save(state, path)
    cfg = make_cfg(tmp_path, *TINY, "epochs=2", "dist.world_size=1", "resume=true")
    cfg.data_root = str(base / "data")
    return cfg


# -- 39.5: every field of a checkpoint --------------------------------------------------------
@pytest.mark.parametrize("edit, field", [
    (lambda s: s.update(epoch=-7), "field epoch is -7"),
    (lambda s: s.update(epoch="0"), "field epoch is '0'"),
    (lambda s: s.pop("optimizer"), "field optimizer is missing"),
    (lambda s: s.update(model=[1, 2]), "field model is not a dict"),
    (lambda s: s.update(rng={}), "field rng is not a non-empty list"),
    (lambda s: s["rng"][0].pop("numpy"), "field rng[0] ['numpy'] lacks"),
    (lambda s: s.update(history=s["history"] * 2), "field history holds 2 records"),
    (lambda s: s["history"][0].pop("epoch_time"), "field history [0]['epoch_time'] is None"),
    (lambda s: s.update(config="x"), "field config is a str"),
])
def test_bad_checkpoint_fields_are_refused_before_training(one_epoch, tmp_path, edit, field):
    cfg = _resume_cfg(one_epoch, tmp_path, edit)
    with pytest.raises(UserError) as err:
        validate(cfg)
    msg = str(err.value)
    assert msg.startswith(f"{cfg.run_dir}/checkpoint.pt: ") and field in msg, msg
    assert "\n" not in msg


def test_text_file_as_checkpoint_is_one_line(tmp_path):
    path = tmp_path / checkpoint.FILENAME
    path.write_text("hello world\n")
    with pytest.raises(checkpoint.CheckpointError, match=f"cannot read the checkpoint {path}"):
        checkpoint.load_run(path)


def test_bad_checkpoint_is_error_exit_2_from_train_py(one_epoch, tmp_path):
    cfg = _resume_cfg(one_epoch, tmp_path, lambda s: s.update(epoch=-7))
    proc = subprocess.run(
        [PY, "train.py", *TINY, "epochs=2", "dist.world_size=1", "resume=true",
         f"run_dir={cfg.run_dir}", f"data_root={cfg.data_root}", "progress=false"],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "field epoch" in lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr


def test_resume_on_a_rewritten_graph_is_refused(one_epoch, tmp_path):
    """The checkpoint records its graph's checksum: another graph under the same config
    (a custom file rewritten in place) is refused, naming the field."""
    cfg = _resume_cfg(one_epoch, tmp_path, lambda s: None)
    state = checkpoint.load(Path(cfg.run_dir) / checkpoint.FILENAME)
    assert isinstance(state["graph"], str)  # recorded by the run
    validate(cfg)  # the same graph: resumes
    state["graph"] = "0" * 32
    torch.save(state, Path(cfg.run_dir) / checkpoint.FILENAME)
    with pytest.raises(UserError, match="checkpoint.pt field graph: the checkpoint was trained "
                                        "on the graph with checksum 0000"):
        validate(cfg)


# -- 39.4: a killed checkpoint write ----------------------------------------------------------
def test_checkpoint_temp_of_a_dead_writer_is_swept(tmp_path):
    path = tmp_path / checkpoint.FILENAME
    dead = tmp_path / f".checkpoint.pt.tmp{_dead_pid()}"
    alive = tmp_path / f".checkpoint.pt.tmp{os.getppid()}"  # a live writer's: kept
    dead.write_bytes(b"x" * 100)
    alive.write_bytes(b"x")
    checkpoint.save(path, {"w": torch.ones(2)})
    assert not dead.exists() and alive.exists()
    alive.unlink()


SAVE_LOOP = """
import sys, torch
from gnnscale.runner import checkpoint
w = torch.randn(8_000_000)
while True:
    checkpoint.save(sys.argv[1], {"w": w})
"""


def test_writer_killed_mid_checkpoint_leaves_the_old_one_and_the_next_save_sweeps(tmp_path):
    path = tmp_path / checkpoint.FILENAME
    checkpoint.save(path, {"w": torch.ones(2)})
    proc = subprocess.Popen([PY, "-c", SAVE_LOOP, str(path)], cwd=ROOT, env=_env())
    tmp = tmp_path / f".checkpoint.pt.tmp{proc.pid}"
    try:
        _wait_for(lambda: tmp.exists() and tmp.stat().st_size > 0, proc)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert tmp.exists()  # killed mid-write
    good = checkpoint.load(path)["w"]  # the old checkpoint, or a complete new one
    assert good.numel() in (2, 8_000_000)
    checkpoint.save(path, {"w": torch.zeros(3)})  # the next run's save
    assert sorted(p.name for p in tmp_path.iterdir()) == [checkpoint.FILENAME]
