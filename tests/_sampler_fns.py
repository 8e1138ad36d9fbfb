"""Module-level helpers for tests/test_sampler_workers.py (run in spawned processes)."""

from __future__ import annotations

import os
import sys
import time

from gnnscale.data import processed
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.workers import SamplerPool


def orphan_workers(folder: str, pid_file: str) -> None:
    """Start a 2-worker pool, write its worker pids, then die without closing it."""
    graph = processed.load(folder)
    pool = SamplerPool(NeighborSampler([3]), graph, 2)
    next(iter(pool.map([(graph.train_idx[:8], 1)])))  # workers are up
    with open(pid_file, "w") as f:
        f.write(" ".join(str(p) for p in pool.pids))
    time.sleep(0.5)
    os._exit(3)  # no finalizers, no atexit: like a SIGKILL


if __name__ == "__main__":
    orphan_workers(sys.argv[1], sys.argv[2])
