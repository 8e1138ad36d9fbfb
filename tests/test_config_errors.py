"""A configuration error is one short message on the command line: no traceback, status 2,
before any rank starts; one the config decides is reported before torch is imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: errors the config alone decides: no dataset is read, torch is never imported
DECIDED = [
    (["partitioner=metis", "partitioner.imbalance=0.9"], "partitioner.imbalance"),
    (["strategy=split", "deps=depcache"], "deps=depcomm or deps=hybrid"),
    (["strategy=fullgraph", "partitioner=oec", "deps=hybrid", "dist.world_size=2"],
     "deps=depcomm only"),
    (["sampler.fanouts=[5]", "model.num_layers=2"], "one fanout per layer"),
    (["strategy=offload", "model=gcn", "strategy.chunks=0"], "strategy.chunks"),
    (["model=gat", "model.hidden=30"], "multiple of model.heads"),
]


def train(tmp_path: Path, *overrides: str, env: dict | None = None
          ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *(["-X", "importtime"] if env else []), "train.py",
                           f"hydra.run.dir={tmp_path / 'run'}", f"data_root={tmp_path / 'data'}",
                           *overrides], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=env)


def one_message(proc: subprocess.CompletedProcess, says: str) -> None:
    """Status 2, no traceback, one ``error: ...`` (at most 5 lines) that says ``says``."""
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    message = [line for line in proc.stderr.splitlines() if not line.startswith("import time")]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert 1 <= len(message) <= 5 and message[0].startswith("error: "), message
    assert says in "\n".join(message)


@pytest.mark.slow
@pytest.mark.parametrize(("overrides", "says"), DECIDED, ids=[e[1] for e in DECIDED])
def test_a_config_error_is_one_message_before_torch_is_imported(tmp_path, overrides, says):
    """Torch, numpy and PyG never imported (``-X importtime``), the data folder not created:
    no dataset is processed for an error the config decides."""
    env = {**os.environ, "GNNSCALE_START_METHOD": "spawn"}  # no fork server importing torch
    proc = train(tmp_path, "dataset.preset=tiny", *overrides, env=env)
    one_message(proc, says)
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time")}
    assert not imported & {"torch", "numpy", "torch_geometric"}, sorted(imported)[:20]
    assert not (tmp_path / "data").exists()
    assert not (tmp_path / "run" / "results.json").exists()


@pytest.mark.slow
def test_missing_raw_files_say_where_and_name_the_lookalike(tmp_path):
    """The dataset is processed after the config checks: its missing files are one message
    too, naming where to put them and the generated graph that needs none."""
    proc = train(tmp_path, "dataset=products")
    one_message(proc, "dataset=products_sim")
    assert "put " in proc.stderr and "dataset.raw_dir" in proc.stderr
    assert not (tmp_path / "run" / "results.json").exists()
