"""Writes stay inside the run folder, the data folder or a temp folder that is removed."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

WANDB_RUN = """
import sys
from gnnscale.runner.loggers.wandb import WandbLogger
logger = WandbLogger(mode="offline")
logger.start({"lr": 0.1}, sys.argv[1])
logger.log_epoch(0, {"train_loss": 1.0})
logger.finish({"final_test_acc": 0.5})
"""


@pytest.mark.slow
def test_wandb_offline_writes_only_inside_the_run_folder(tmp_path):
    pytest.importorskip("wandb")
    home, tmp, run_dir = tmp_path / "home", tmp_path / "tmp", tmp_path / "run"
    for d in (home, tmp):
        d.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "XDG_"))}
    env.update(HOME=str(home), TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", WANDB_RUN, str(run_dir)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert list(home.rglob("*")) == [], "wandb wrote under the home folder"
    assert any((run_dir / "wandb").glob("offline-run-*/*.wandb"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "run", "tmp"]


TRAIN_RUN = """
import sys
from tests._train import TINY, make_cfg
from gnnscale.runner.run import run
if __name__ == "__main__":
    from pathlib import Path
    run(make_cfg(Path(sys.argv[1]), *TINY, "epochs=1", "dist.world_size=1", "model=gcn"))
"""


@pytest.mark.slow
def test_a_run_leaves_nothing_in_the_temp_folder(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = tmp_path / "go.py"
    script.write_text(TRAIN_RUN)
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(script), str(tmp_path)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # importing torch_geometric in this (the launching) process makes torch create one empty
    # per-user inductor folder before gnnscale runs; everything else must be gone
    left = [p for p in tmp.iterdir() if not (p.name.startswith("torchinductor_")
                                             and not any(p.iterdir()))]
    assert left == []
    data = tmp_path / "data"
    for folder in [p for p in data.rglob("*") if p.is_dir()]:
        assert folder.stat().st_mode & 0o077 != 0, f"{folder} is private to its owner"
