"""``dist.bind_cores``: each spawned rank on its own block of free cores, never onto cores
other work keeps busy; processes a rank starts take the launcher's cores back."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gnnscale.distributed import local, threads
from gnnscale.distributed.launch import spawn


@pytest.mark.parametrize("rank, nthreads, cores, want", [
    (0, 1, [0, 1], [0]), (1, 1, [0, 1], [1]), (2, 1, [0, 1], [0]), (3, 1, [0, 1], [1]),
    (1, 2, [0, 1, 2, 3], [2, 3]), (2, 2, [0, 1, 2, 3], [0, 1]), (0, 3, [4, 5], [4, 5]),
    (1, 1, [7, 3, 5], [5]),
])
def test_rank_cores_gives_blocks_then_round_robin(rank, nthreads, cores, want):
    assert threads.rank_cores(rank, nthreads, cores) == want


@pytest.mark.parametrize("world, per_rank, bind, load, want", [
    (2, 1, True, (0, [0, 1]), [0, 1]),          # idle: each rank its core
    (2, 1, True, (1, [1]), None),               # one core busy: the ranks do not fit in one
    (4, 1, True, (1, [2, 3, 1]), None),         # 4 ranks, 3 free cores, 1 busy: unbound
    (2, 1, False, (0, [0, 1]), None),           # dist.bind_cores=false
    (1, 1, True, (0, [0, 1]), None),            # one rank runs in the launcher: never bound
])
def test_launcher_binds_only_onto_free_cores(monkeypatch, world, per_rank, bind, load, want):
    monkeypatch.setattr(local, "host_load", lambda: load)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(2)))
    launcher = local.Launcher(world_size=world, threads_per_rank=per_rank, bind_cores=bind)
    got_threads, cores = launcher._plan()
    assert got_threads == per_rank
    assert cores == want


def test_oversubscribed_by_its_own_ranks_shares_every_core(monkeypatch):
    """More ranks than cores on an idle host: bound round-robin over every allowed core."""
    monkeypatch.setattr(local, "host_load", lambda: (0, [0, 1]))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert local.Launcher(world_size=4, threads_per_rank=1)._plan() == (1, [0, 1])


def _affinity(topo):
    return sorted(os.sched_getaffinity(0)), os.environ.get(threads.HOST_CORES_ENV)


@pytest.mark.skipif(threads.allowed_cores() < 2, reason="needs 2 cores to bind 2 ranks apart")
def test_spawned_ranks_run_on_their_own_cores():
    cores = sorted(os.sched_getaffinity(0))[:2]
    got = spawn(_affinity, 2, threads_per_rank=1, cores=cores, timeout_s=60.0)
    assert [g[0] for g in got] == [[cores[0]], [cores[1]]]
    assert all(g[1] == ",".join(map(str, cores)) for g in got)
    unbound = spawn(_affinity, 2, threads_per_rank=1, cores=None, timeout_s=60.0)
    assert [g[0] for g in unbound] == [sorted(os.sched_getaffinity(0))] * 2


@pytest.mark.skipif(threads.allowed_cores() < 2, reason="needs 2 cores")
def test_a_process_a_bound_rank_starts_takes_the_launchers_cores_back():
    cores = sorted(os.sched_getaffinity(0))
    code = ("import os\nfrom gnnscale.distributed import threads\n"
            f"threads.bind_rank(1, 1, {cores!r})\n"
            "bound = sorted(os.sched_getaffinity(0))\n"
            "threads.unbind()\n"
            "print(bound, sorted(os.sched_getaffinity(0)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split("] [")
    assert out[0] + "]" == str([cores[1]])
    assert "[" + out[1].strip() == str(cores)


@pytest.mark.parametrize("strategy, binds", [("data", True), ("split", True),
                                             ("factored", False)])
def test_a_strategy_whose_ranks_run_at_their_own_pace_stays_unbound(tmp_path, strategy, binds):
    """``factored``'s samplers and trainers meet through a queue, not in lockstep: it
    declares ``binds_cores = False`` and its launcher binds nothing; the others bind."""
    from gnnscale.runner.run import launcher
    from tests._train import TINY, make_cfg

    cfg = make_cfg(tmp_path, *TINY, f"strategy={strategy}", "dist.world_size=2")
    assert launcher(cfg).bind_cores is binds
    off = make_cfg(tmp_path, *TINY, f"strategy={strategy}", "dist.world_size=2",
                   "dist.bind_cores=false")
    assert launcher(off).bind_cores is False
