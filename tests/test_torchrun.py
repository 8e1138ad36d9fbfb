"""Multi-node through torchrun: two "nodes" on loopback with c10d rendezvous on 127.0.0.1."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gnnscale.distributed import free_port
from tests._train import TINY

pytestmark = pytest.mark.slow  # multi-rank / subprocess tests: the slow tier

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("extra", [
    (),
    # the queue across "hosts": the sampler on one node feeds the trainer on the other, and
    # pre-samples the trainer's PreSC cache
    ("strategy=factored", "strategy.samplers=1", "cache=presample", "cache.ratio=0.2"),
], ids=["data", "factored"])
def test_two_nodes_on_loopback(tmp_path, extra):
    port = free_port()
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                "--nproc_per_node", "1", "--rdzv_backend", "c10d",
                "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", "gnnscale-test",
                "--max_restarts", "0"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    nodes = [
        subprocess.Popen(
            [*torchrun, "train.py", *TINY, *extra, "epochs=2", f"run_dir={tmp_path / 'run'}",
             f"data_root={tmp_path / f'node{i}'}", "progress=false", "dist.timeout_s=120"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for i in range(2)
    ]
    outs = [p.communicate(timeout=300)[0] for p in nodes]
    assert [p.returncode for p in nodes] == [0, 0], "\n".join(outs)
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    assert res["summary"]["world_size"] == 2
    assert res["summary"]["final_test_acc"] > 0.3
    if extra:
        last = res["history"][-1]
        assert (last["samplers"], last["trainers"]) == (1, 1)
        assert last["samples_produced"] == last["samples_consumed"] > 0
        assert last["queue_bytes"] > 0 and last["presample_time"] > 0
        assert last["cache_hit_rate_per_rank"] == [last["cache_hit_rate"]] and last["hits"] > 0
