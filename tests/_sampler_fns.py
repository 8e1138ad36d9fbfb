"""Module-level helpers for tests/sampling/test_sampler_workers.py and
tests/integration/test_hardening_processes.py
(run in spawned processes or ranks)."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from datetime import timedelta
from multiprocessing import resource_tracker

import torch.distributed as dist

from gnnscale.data import processed
from gnnscale.distributed.topology import run_timeout
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.workers import SamplerPool

STARTUP_S = 300.0  # a worker's start-up on a busy host: apart from the deadline under test


class UnsendableSampler(NeighborSampler):
    """Samples, then returns what is no mini-batch (a lambda): the worker can neither encode nor
    send it, and says so instead of losing the job."""

    def sample(self, graph, seeds, seed=0):
        mb = super().sample(graph, seeds, seed)
        return lambda: mb


def orphan_workers(folder: str, pid_file: str, stop: str = "") -> None:
    """Start a 2-worker pool, write its worker pids (then the resource tracker's), stop worker
    0 when ``stop`` is given, then die without closing it."""
    graph = processed.load(folder)
    pool = SamplerPool(NeighborSampler([3]), graph, 2)
    next(iter(pool.map([(graph.train_idx[:8], 1)])))  # workers are up
    pids = list(pool.pids)
    if stop:
        os.kill(pids[0], signal.SIGSTOP)
        pids.append(resource_tracker._resource_tracker._pid)
    with open(pid_file, "w") as f:
        f.write(" ".join(str(p) for p in pids))
    time.sleep(0.5)
    os._exit(3)  # no finalizers, no atexit: like a SIGKILL


def nested_temp_pool(folder: str) -> None:
    """Sample with 2 workers from inside a 1-rank run's nested temp folders (the launcher's
    private folder, then the rank's), as ``train.py dist.world_size=1`` does, and print
    where the sockets went."""
    from gnnscale.distributed.guard import run_temp_dir
    from gnnscale.distributed.launch import private_temp_dir

    graph = processed.load(folder)
    run_temp_dir()
    with private_temp_dir("gnnscale-rank-"):
        with SamplerPool(NeighborSampler([3]), graph, 2, timeout_s=60) as pool:
            jobs = [(graph.train_idx[i:i + 8], i) for i in range(4)]
            got = [mb for mb, _ in pool.map(jobs)]
            assert len(got) == 4
        from multiprocessing import util

        print(util.get_temp_dir(), tempfile.gettempdir(), flush=True)


def stopped_worker_rank(topo, folder: str, stamp: str) -> None:
    """Each rank samples with one worker; rank 0 stops its worker (writing the time to
    ``stamp``), then both go on: rank 0 waits for its batch, rank 1 in a barrier (a rank
    function). The workers' start-up, which a busy host slows, runs under a deadline of its
    own (the pool's and the start-up barrier's); the run's deadline, the one under test, is
    armed once both workers are ready."""
    started = dist.new_group([0, 1], timeout=timedelta(seconds=STARTUP_S))
    deadline = run_timeout().total_seconds()
    graph = processed.load(folder)
    with SamplerPool(NeighborSampler([3]), graph, 1, timeout_s=STARTUP_S) as pool:
        jobs = [(graph.train_idx[i:i + 8], i) for i in range(3)]
        next(iter(pool.map(jobs[:1])))
        pool.timeout_s = deadline
        dist.barrier(group=started)
        if topo.rank == 0:
            os.kill(pool.pids[0], signal.SIGSTOP)
            with open(stamp, "w") as f:
                f.write(repr(time.time()))
            list(pool.map(jobs))
        dist.barrier()


if __name__ == "__main__":
    if sys.argv[1] == "nested":
        nested_temp_pool(sys.argv[2])
    else:
        orphan_workers(*sys.argv[1:])
