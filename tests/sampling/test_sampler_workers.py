"""Sampler worker processes: same draws as the inline sampler, in order; errors, early exit,
dead workers and dead parents; 2-rank training with sample_workers equals the thread path."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from gnnscale.data import processed
from gnnscale.distributed import RankFailed
from gnnscale.runner.run import run
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.schedule import Schedule
from gnnscale.sampling.workers import SamplerPool, SamplerWorkerError
from tests._train import TINY, make_cfg

pytestmark = pytest.mark.slow  # multi-rank / subprocess tests: the slow tier

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def graph(tmp_path_factory, tiny_graph):
    """The tiny graph saved and loaded back (memory-mapped, knows its processed folder)."""
    folder = tmp_path_factory.mktemp("g") / "processed"
    processed.save(tiny_graph, folder)
    return processed.load(folder)


def _jobs(graph, n: int, world: int = 1, rank: int = 0) -> list[tuple[torch.Tensor, int]]:
    schedule = Schedule(graph.train_idx, batch_size=64, seed=7, slots=world)
    jobs = [(d.seeds, d.sample_seed) for d in schedule.draws(0, slots=[rank])]
    return jobs[:n]


def _same(a, b) -> bool:
    return (torch.equal(a.n_id, b.n_id) and a.num_targets == b.num_targets
            and all(x.size == y.size and torch.equal(x.edge_index, y.edge_index)
                    for x, y in zip(a.blocks, b.blocks, strict=True)))


def _gone(pids, within: float) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not any(Path(f"/proc/{p}").exists() and "Z" not in _state(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][:1]
    except (OSError, IndexError):
        return "Z"


def test_pool_equals_inline_in_order_and_survives_an_early_break(graph, tiny_graph):
    sampler = NeighborSampler([5, 5])
    jobs = _jobs(graph, 9)
    ref = [sampler.sample(graph, t, s) for t, s in jobs]
    with SamplerPool(sampler, graph, 2, depth=3) as pool:
        assert pool.source == "dir"
        out = list(pool.map(jobs))
        assert len(out) == len(jobs) and all(_same(mb, r) for (mb, _), r in zip(out, ref))
        assert all(sec >= 0 for _, sec in out)
        for i, _ in enumerate(pool.map(jobs)):  # break early: the rest is cancelled ...
            if i == 1:
                break
        again = [mb for mb, _ in pool.map(jobs[3:])]  # ... and never leaks into the next map
        assert all(_same(mb, r) for mb, r in zip(again, ref[3:], strict=True))
        pids = pool.pids
    assert _gone(pids, 10), "workers still running after close"
    # an in-memory graph has no processed folder: its topology goes through shared memory
    with SamplerPool(sampler, tiny_graph, 1, depth=2) as pool:
        assert pool.source == "shm"
        assert all(_same(mb, r) for (mb, _), r in zip(pool.map(jobs[:3]), ref))


def test_worker_error_carries_its_traceback_and_dead_worker_is_reported(graph):
    with SamplerPool(NeighborSampler([3], weighted=True), graph, 1) as pool:
        with pytest.raises(SamplerWorkerError, match=r"(?s)worker 0 failed on job 0.*"
                                                     r"Traceback.*no edge_weight"):
            list(pool.map(_jobs(graph, 2)))
    with SamplerPool(NeighborSampler([3]), graph, 1, poll_s=0.2) as pool:
        next(iter(pool.map(_jobs(graph, 1))))
        os.kill(pool.pids[0], signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(SamplerWorkerError, match=r"died \(killed by signal SIGKILL\)"):
            list(pool.map(_jobs(graph, 3)))
        assert time.monotonic() - start < 5
    with pytest.raises(ValueError, match="workers >= 1"):
        SamplerPool(NeighborSampler([3]), graph, 0)


_RELEASE = threading.Event()


def _held_until_released(msg):
    _RELEASE.wait(60)
    return msg


class _StuckInHandshake:
    """A result message whose rebuild blocks, as a shared body's file-descriptor handshake
    does when its worker stops mid-send."""

    def __reduce__(self):
        return _held_until_released, ((None, -3, 0, True, None),)


def test_a_result_stuck_in_its_handshake_blocks_neither_deadline_nor_ctrl_c(graph):
    """The consumer waits on the pool's receiving thread, not inside a handshake: the job's
    deadline still fires (naming the stuck handshake), and a signal handler still runs.
    The deadline under test is armed only once the worker is ready (its start-up, which a
    busy host slows, runs under a deadline of its own), and the bounds on the time taken
    only tell a deadline that fires from one that never does."""
    _RELEASE.clear()
    try:
        with SamplerPool(NeighborSampler([3]), graph, 1, poll_s=0.1, timeout_s=120) as pool:
            next(iter(pool.map(_jobs(graph, 1))))  # the worker is ready
            pool.timeout_s = 2.0  # the deadline under test, armed now
            pool._results.put(_StuckInHandshake())  # ahead of the next job's result
            start = time.monotonic()
            with pytest.raises(SamplerWorkerError, match=r"sent no result for job 0 within 2 s"
                               r".*stuck for \d+ s in the handshake"):
                list(pool.map(_jobs(graph, 1)))
            assert 2 <= time.monotonic() - start < 60

            def interrupt(*_):
                raise KeyboardInterrupt

            pool.timeout_s = 120.0  # only the signal can end this wait
            previous = signal.signal(signal.SIGALRM, interrupt)
            try:
                signal.setitimer(signal.ITIMER_REAL, 0.5)
                start = time.monotonic()
                with pytest.raises(KeyboardInterrupt):
                    list(pool.map(_jobs(graph, 1)))
                assert time.monotonic() - start < 60
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
    finally:
        _RELEASE.set()


def test_workers_exit_when_their_parent_dies(graph, tmp_path):
    pid_file = tmp_path / "pids"
    proc = subprocess.run([sys.executable, "-m", "tests._sampler_fns",
                           graph.meta["processed_dir"], str(pid_file)], cwd=ROOT, timeout=60,
                          capture_output=True, text=True)
    assert proc.returncode == 3, proc.stderr
    pids = [int(p) for p in pid_file.read_text().split()]
    assert len(pids) == 2 and _gone(pids, 10), "orphaned sampler workers kept running"


@pytest.mark.parametrize("strategy", ["split", "data"])
def test_two_ranks_with_sampler_workers_train_like_the_thread(tmp_path, strategy):
    losses = []
    for workers in (0, 1):
        cfg = make_cfg(tmp_path, *TINY, f"strategy={strategy}", "dist.world_size=2",
                       "epochs=1", f"strategy.sample_workers={workers}", run=f"w{workers}")
        losses.append([h["train_loss"] for h in run(cfg)["history"]])
    assert len(losses[0]) == 1 and losses[0] == losses[1]


def test_a_sampler_worker_error_ends_a_split_run(tmp_path):
    """The sampling ranks' pools really sample (a worker's error reaches the launcher) and
    nothing hangs; every rank samples its share of the steps, so either may fail first."""
    cfg = make_cfg(tmp_path, *TINY, "strategy=split", "dist.world_size=2", "epochs=1",
                   "strategy.sample_workers=1", "sampler.weighted=true")
    start = time.monotonic()
    with pytest.raises(RankFailed, match="(?s)rank [01] failed.*sampler worker 0 failed"):
        run(cfg)
    assert time.monotonic() - start < 200  # well before the run's 300 s deadline, start-up in


def test_workers_sample_a_typed_graph_built_in_memory_with_its_edge_types():
    """A typed graph without a processed folder reaches the workers with its types (shared
    memory): their blocks carry the same edge ids and types as the inline sampler's."""
    from tests.data.test_typed_graph_store import build

    typed = build()
    sampler = NeighborSampler([3, 2])
    seeds = torch.arange(typed.num_nodes_of("paper"))
    want = sampler.sample(typed, seeds, 5)
    with SamplerPool(sampler, typed, 1) as pool:
        (got, _), = list(pool.map([(seeds, 5)]))
    assert torch.equal(got.n_id, want.n_id)
    for a, b in zip(got.blocks, want.blocks):
        assert b.edge_type is not None and torch.equal(a.edge_type, b.edge_type)
        assert torch.equal(a.e_id, b.e_id) and torch.equal(a.edge_index, b.edge_index)
