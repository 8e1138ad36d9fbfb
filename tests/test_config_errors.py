"""A configuration error is one short message on the command line: no traceback, status 2,
before any rank starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize(("overrides", "says"), [
    (["partitioner=metis", "partitioner.imbalance=0.9"], "partitioner.imbalance"),
    (["strategy=split", "deps=depcache"], "deps=depcomm or deps=hybrid"),
    (["dataset=products"], "dataset=products_sim"),
    (["strategy=fullgraph", "partitioner=oec", "deps=hybrid", "dist.world_size=2"],
     "deps=depcomm only"),
    (["sampler.fanouts=[5]", "model.num_layers=2"], "one fanout per layer"),
])
def test_bad_config_is_one_message_with_status_2(tmp_path, overrides, says):
    proc = subprocess.run([sys.executable, "train.py", f"hydra.run.dir={tmp_path / 'run'}",
                           f"data_root={tmp_path / 'data'}", "dataset.preset=tiny", *overrides]
                          if overrides[0] != "dataset=products" else
                          [sys.executable, "train.py", f"hydra.run.dir={tmp_path / 'run'}",
                           f"data_root={tmp_path / 'data'}", *overrides],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    message = proc.stderr.strip().splitlines()
    assert 1 <= len(message) <= 5 and message[0].startswith("error: "), message
    assert says in proc.stderr
    assert not (tmp_path / "run" / "results.json").exists()
