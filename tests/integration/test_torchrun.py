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

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("extra,per_node", [
    ((), 1),
    # the queue across "hosts": the sampler on one node feeds the trainer's ring on the other
    # over the network, and pre-samples the trainer's PreSC cache
    (("strategy=factored", "strategy.samplers=1", "cache=presample", "cache.ratio=0.2"), 1),
    # 2 x 2 ranks: node 0's trainers take from their ring, fed over the network by node 1's
    # sampler, which also feeds (and, switching, trains from) node 1's ring
    (("strategy=factored", "strategy.samplers=1", "strategy.switching=true"), 2),
], ids=["data", "factored", "factored-2x2"])
def test_two_nodes_on_loopback(tmp_path, extra, per_node):
    port = free_port()
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                "--nproc_per_node", str(per_node), "--rdzv_backend", "c10d",
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
    world = 2 * per_node
    assert res["summary"]["world_size"] == world
    assert res["summary"]["final_test_acc"] > 0.3
    if extra:
        last = res["history"][-1]
        assert (last["samplers"], last["trainers"]) == (1, world - 1)
        assert last["samples_produced"] == last["samples_consumed"] > 0
        assert last["queue_shared"] == 1 and last["queue_bytes"] > 0  # rings, not routes
        # node 0's trainers took jobs from their ring, which only node 1's sampler feeds
        assert sum(last[f"queue_jobs_rank_{r}"] for r in range(per_node)) > 0
        assert "fixed routes" not in "".join(outs)
    if "cache=presample" in extra:
        assert last["presample_time"] > 0 and last["hits"] > 0
        assert last["cache_hit_rate_per_rank"] == [last["cache_hit_rate"]]
