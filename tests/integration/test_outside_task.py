"""A task added from outside gnnscale (docs/adding-a-task.md, its files taken from the page
itself): the launcher reads its declarations without importing its class, it trains under
``strategy=fullgraph`` and ``strategy=data`` on 1 and 2 ranks with equal losses, and a
finished run predicts its tables, with no file of gnnscale edited."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests import _guides as guides

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "adding-a-task.md"
TINY = ["dataset=synthetic", "dataset.preset=tiny", "model.hidden=16", "model.num_layers=2",
        "sampler.fanouts=[5,5]", "eval_batch_size=512",
        "logger=none", "progress=false", "model.dropout=0"]


def page_files() -> dict[str, str]:
    """The fenced blocks of the page that name a file (```lang file=PATH)."""
    return guides.page_files(PAGE)


def install(tmp: Path) -> Path:
    return guides.install(PAGE, tmp)


def env_for(tmp: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{tmp}{os.pathsep}{ROOT}", "PYTHONUNBUFFERED": "1"}


def train(tmp: Path, run: str, *overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "train.py", f"hydra.searchpath=[file://{tmp}/conf]",
                           f"hydra.run.dir={tmp / run}", f"data_root={tmp / 'data'}", *TINY,
                           "task=degree", *overrides], cwd=ROOT, env=env_for(tmp),
                          capture_output=True, text=True, timeout=600)


def test_the_page_names_its_files():
    assert set(page_files()) == {"my_tasks/degree/config.py", "my_tasks/degree/task.py",
                                 "conf/task/degree.yaml"}


def test_the_launcher_reads_the_declarations_without_the_class(tmp_path):
    """The config is checked (``metric=`` and ``parts=`` against the declarations) from
    config.py alone: neither the task module nor torch is imported."""
    tmp = install(tmp_path)
    code = f"""
import sys
from hydra import compose, initialize_config_dir
from gnnscale import registry
from gnnscale.errors import ConfigError
from gnnscale.runner.validate import check_config
from gnnscale.tasks.config import declared_task
registry.load_all()
def cfg(*more):
    with initialize_config_dir("{ROOT / 'configs'}", version_base=None):
        return compose("config", overrides=["hydra.searchpath=[file://{tmp}/conf]",
                                            "task=degree", *more])
decl = declared_task(cfg())
print(decl.__name__, decl.columns(), decl.output_width(None, 7))
check_config(cfg())
try:
    check_config(cfg("metric=acc"))
except ConfigError as err:
    print("ConfigError", err)
print(decl.parts_problem())
print(sorted(m for m in ("torch", "my_tasks.degree.task") if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp, env=env_for(tmp),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0] == "DegreeConfig ('val_loss', 'val_r2', 'test_r2') 1", lines
    assert lines[1] == ("ConfigError metric=acc is not a metric of task=degree: use "
                        "metric=auto or one of r2"), lines
    assert lines[2].startswith("task=degree cannot train from parts=: it is not trained from "
                               "parts= yet; use task=node"), lines
    assert lines[3] == "[]", lines


@pytest.mark.slow
def test_outside_task_trains_on_two_ranks_like_one_process_and_predicts(tmp_path):
    """fullgraph on 2 ranks equals 1 (its sharded loss and owned evaluation), and so does
    data (sampled fanouts: a step's micro-batches sample what one process does); the 1-rank
    run's test predictions score its reported ``test_r2``; a request the task does not take
    is one line."""
    tmp = install(tmp_path)
    runs = {}
    for world in (1, 2):
        proc = train(tmp, f"w{world}", "strategy=fullgraph", "deps=depcomm",
                     f"dist.world_size={world}", "epochs=3")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        runs[world] = json.loads((tmp / f"w{world}" / "results.json").read_text())
    losses = {w: [h["train_loss"] for h in r["history"]] for w, r in runs.items()}
    assert losses[2] == pytest.approx(losses[1], rel=1e-4)
    assert losses[1][-1] < losses[1][0]
    summary = runs[1]["summary"]
    assert {"final_val_r2", "final_test_r2"} <= set(summary), summary
    hists = {}
    for world in (1, 2):  # the sampling seams: seeds, target, loss
        sampled = train(tmp, f"data{world}", "strategy=data", "strategy.batch_size=128",
                        f"dist.world_size={world}", "epochs=3")
        assert sampled.returncode == 0, sampled.stdout[-3000:] + sampled.stderr[-3000:]
        hists[world] = json.loads((tmp / f"data{world}" / "results.json").read_text())[
            "history"]
    hist = hists[2]
    assert hist[-1]["train_loss"] < hist[0]["train_loss"] and "val_r2" in hist[-1], hist
    for key in ("train_loss", "val_loss", "val_r2", "test_r2"):
        np.testing.assert_allclose([h[key] for h in hists[2]], [h[key] for h in hists[1]],
                                   rtol=1e-5, err_msg=key)

    code = f"""
import json
from pathlib import Path
import numpy as np
import my_tasks.degree.config  # noqa: F401  (the page's way: declares task=degree)
import gnnscale
from gnnscale.errors import UserError
run = gnnscale.load_run("{tmp / 'w1'}")
nodes = run.predict(split="test", out="{tmp / 'pred'}", format="npy")["nodes"]
y, pred = nodes["log_degree"].astype(np.float64), nodes["pred"].astype(np.float64)
r2 = 1 - ((pred - y) ** 2).mean() / y.var()
try:
    run.predict(top_k=3)
except UserError as err:
    refused = str(err)
print(json.dumps({{"n": len(nodes["id"]), "r2": r2, "refused": refused,
                  "files": sorted(p.name for p in Path("{tmp / 'pred'}").iterdir())}}))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp, env=env_for(tmp),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["r2"] == pytest.approx(summary["final_test_r2"], abs=1e-5)
    assert got["n"] > 0 and "predictions.json" in got["files"] and "nodes" in got["files"]
    assert got["refused"] == ("task=degree predicts per node (split=all|train|val|test); it "
                              "takes no top_k="), got
