"""A strategy added from outside gnnscale (docs/adding-a-strategy.md, its files taken from the
page itself): it trains on 2 ranks, matches one process, ``strategy=auto`` profiles it, and the
launcher reads its declarations without importing its class, with no file of gnnscale
edited."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import _guides as guides

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "adding-a-strategy.md"
TINY = ["dataset=synthetic", "dataset.preset=tiny", "model.hidden=16", "model.num_layers=2",
        "sampler.fanouts=[5,5]", "eval_batch_size=512",
        "logger=none", "progress=false", "checkpoint=false"]


def page_files() -> dict[str, str]:
    """The fenced blocks of the page that name a file (```lang file=PATH)."""
    return guides.page_files(PAGE)


def install(tmp: Path) -> Path:
    return guides.install(PAGE, tmp)


def train(tmp: Path, run: str, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tmp), "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "train.py", f"hydra.searchpath=[file://{tmp}/conf]",
                           f"hydra.run.dir={tmp / run}", f"data_root={tmp / 'data'}", *TINY,
                           *overrides], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)


def test_the_page_names_its_files():
    assert set(page_files()) == {"my_strategies/replicated/config.py",
                                 "my_strategies/replicated/strategy.py",
                                 "conf/strategy/replicated.yaml"}


def test_the_launcher_reads_the_declarations_without_the_class(tmp_path):
    """Its config is checked (a misspelt key too) and auto's question answered from
    config.py alone: neither the strategy module nor torch is imported."""
    tmp = install(tmp_path)
    code = f"""
import sys
from hydra import compose, initialize_config_dir
from gnnscale import registry
from gnnscale.runner.validate import check_config
from gnnscale.strategies.config import declared
registry.load_all()
with initialize_config_dir("{ROOT / 'configs'}", version_base=None):
    cfg = compose("config", overrides=["hydra.searchpath=[file://{tmp}/conf]",
                                       "strategy=replicated", "deps=depcomm"])
decl = declared(cfg.strategy)
print(decl.__name__, decl.samples, decl.why_not_candidate(cfg))
try:
    check_config(cfg)
except Exception as err:
    print(type(err).__name__, err)
with initialize_config_dir("{ROOT / 'configs'}", version_base=None):
    bad = compose("config", overrides=["hydra.searchpath=[file://{tmp}/conf]",
                                       "strategy=replicated", "+strategy.chunkz=2"])
try:
    check_config(bad)
except Exception as err:
    print(type(err).__name__, err)
print(sorted(m for m in ("torch", "my_strategies.replicated.strategy") if m in sys.modules))
"""
    env = {**os.environ, "PYTHONPATH": f"{tmp}{os.pathsep}{ROOT}"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0] == "ReplicatedConfig False None", lines
    assert lines[1].startswith("ConfigError strategy=replicated replicates every dependency"), \
        lines
    assert lines[2].startswith("ConfigError strategy.chunkz is not an option of "
                               "strategy=replicated"), lines
    assert lines[3] == "[]", lines


@pytest.mark.slow
def test_outside_strategy_trains_on_two_ranks_like_one_process(tmp_path):
    tmp = install(tmp_path)
    losses = {}
    for world in (1, 2):
        proc = train(tmp, f"w{world}", "strategy=replicated", f"dist.world_size={world}",
                     "epochs=2", "model.dropout=0")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        hist = json.loads((tmp / f"w{world}" / "results.json").read_text())["history"]
        losses[world] = [h["train_loss"] for h in hist]
    assert losses[2] == pytest.approx(losses[1], rel=1e-4)
    assert losses[1][1] < losses[1][0]


@pytest.mark.slow
def test_auto_profiles_the_outside_strategy(tmp_path):
    tmp = install(tmp_path)
    proc = train(tmp, "auto", "strategy=auto", "dist.world_size=2", "epochs=1",
                 "strategy.profile_epochs=2", "strategy.rematch_rounds=0",
                 "strategy.batch_size=128", "strategy.profile_share=null")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    decision = json.loads((tmp / "auto" / "auto.json").read_text())
    rows = {r["name"]: r for r in decision["candidates"]}
    assert "replicated" in rows and rows["replicated"]["status"] == "ran", rows
    assert {"data", "split", "factored", "fullgraph", "offload"} <= set(rows)
    assert "replicated" in proc.stdout
