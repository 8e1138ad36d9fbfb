"""Checkpoints: loaded with weights_only=True (a planted file runs nothing), RNG states restored
exactly, a failed write removes its temp file and names the path."""

import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnscale.runner import checkpoint
from tests._payload import RunsShell

ROOT = Path(__file__).resolve().parents[2]


def test_planted_checkpoint_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / checkpoint.FILENAME
    torch.save({"model": {}, "payload": RunsShell(marker)}, path)
    with pytest.raises(checkpoint.CheckpointError, match="can load safely"):
        checkpoint.load(path)
    assert not marker.exists()


def test_rng_states_round_trip_through_a_checkpoint(tmp_path):
    torch.manual_seed(3)
    np.random.seed(4)
    random.seed(5)
    np.random.normal()  # a cached gaussian in numpy's state
    path = tmp_path / checkpoint.FILENAME
    checkpoint.save(path, {"rng": [checkpoint.rng_state()], "config": {"a": [1, None, "x"]}})
    expected = (torch.rand(3), np.random.rand(3), [random.random() for _ in range(3)],
                np.random.normal())
    state = checkpoint.load(path)
    assert state["config"] == {"a": [1, None, "x"]}
    checkpoint.set_rng_state(state["rng"][0])
    got = (torch.rand(3), np.random.rand(3), [random.random() for _ in range(3)],
           np.random.normal())
    torch.testing.assert_close(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])
    assert got[2] == expected[2] and got[3] == expected[3]


WRITE_FAILS = """
import resource, signal, sys, torch
from gnnscale.runner import checkpoint
from tests._payload import RunsShell
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
checkpoint.save(sys.argv[1], {"w": torch.zeros(100_000)})
"""


def test_failed_write_removes_temp_file_and_keeps_old_checkpoint(tmp_path):
    path = tmp_path / checkpoint.FILENAME
    checkpoint.save(path, {"w": torch.ones(2)})
    proc = subprocess.run([sys.executable, "-c", WRITE_FAILS, str(path)], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode != 0
    assert "CheckpointError" in proc.stderr and str(path) in proc.stderr
    assert "File too large" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [checkpoint.FILENAME]
    torch.testing.assert_close(checkpoint.load(path)["w"], torch.ones(2))


def test_typed_config_choices_are_stored_as_plain_values(tmp_path):
    from gnnscale.distributed import Backend

    path = tmp_path / checkpoint.FILENAME
    checkpoint.save(path, {"config": {"dist": {"backend": Backend.gloo}}})
    assert checkpoint.load(path)["config"] == {"dist": {"backend": "gloo"}}
