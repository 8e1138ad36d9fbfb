"""train.py composes a single run's config once (runner/warm.compose_once skips Hydra's first
composition, which only reads ``hydra.mode``): never where a config could set that mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

from gnnscale.paths import CONFIGS
from gnnscale.runner.warm import compose_once

ROOT = Path(__file__).resolve().parents[2]

#: a user's experiment that makes the run a sweep over two seeds
SWEEP = ("# @package _global_\nhydra:\n  mode: MULTIRUN\n  sweeper:\n    params:\n"
         "      seed: 3,4\n")


def test_gnnscales_own_configs_never_set_the_run_mode_or_a_search_path():
    """What lets compose_once skip the composition that reads hydra.mode: no option of the
    package's configs sets it (nor adds a folder of configs that could)."""
    files = sorted(CONFIGS.rglob("*.yaml"))
    assert len(files) > 50
    for file in files:
        text = file.read_text()
        node = OmegaConf.load(file)
        package = next((line.split("@package", 1)[1].strip() for line in text.splitlines()
                        if "@package" in line), "")
        hydra = node if package.startswith("hydra") else node.get("hydra")
        assert not (file.relative_to(CONFIGS).parts[0] == "hydra"), file
        if isinstance(hydra, DictConfig):
            assert "mode" not in hydra and "searchpath" not in hydra, file


@pytest.mark.parametrize("argv", [
    ["hydra.searchpath=[file:///my/configs]", "experiment=mine"],
    ["+hydra.searchpath=[pkg://mypkg.conf]"],
    ["hydra.mode=MULTIRUN"],
    ["--config-dir", "mine"],
    ["-m", "seed=0,1"],
])
def test_not_done_where_a_users_config_may_set_the_mode(argv):
    assert compose_once(argv) is False, argv  # returns before touching Hydra


def _train(argv: list[str], tmp_path: Path) -> dict:
    """``train.py argv`` in a fresh interpreter, each job's config recorded instead of run:
    the jobs' (hydra.mode, seed) and the exit status."""
    code = (
        "import json, runpy, sys\n"
        "from hydra.core.hydra_config import HydraConfig\n"
        "import gnnscale.runner.run as r\n"
        "seen = []\n"
        "def run(cfg):\n"
        "    seen.append([HydraConfig.get().mode.name, cfg.seed])\n"
        "    return {}\n"
        "r.run = run\n"
        f"sys.argv = ['train.py', *{argv!r}, 'hydra.run.dir={tmp_path / 'run'}',"
        f" 'hydra.sweep.dir={tmp_path / 'sweep'}', 'data_root={tmp_path / 'data'}']\n"
        "status = 0\n"
        "try:\n"
        "    runpy.run_path('train.py', run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    status = e.code\n"
        "print(json.dumps({'jobs': seen, 'status': status}))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "GNNSCALE_START_METHOD": "spawn"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_users_config_that_sets_multirun_runs_a_sweep(tmp_path):
    """A user's experiment in their own search path sets hydra.mode: MULTIRUN, no ``-m``:
    Hydra's sweep, both jobs (a single run of seed 0 before)."""
    folder = tmp_path / "my_configs"
    (folder / "experiment").mkdir(parents=True)
    (folder / "experiment" / "two_seeds.yaml").write_text(SWEEP)
    got = _train([f"hydra.searchpath=[file://{folder}]", "experiment=two_seeds"], tmp_path)
    assert got == {"jobs": [["MULTIRUN", 3], ["MULTIRUN", 4]], "status": 0}
    plain = _train(["seed=5"], tmp_path)  # gnnscale's configs alone: one run, composed once
    assert plain == {"jobs": [["RUN", 5]], "status": 0}
