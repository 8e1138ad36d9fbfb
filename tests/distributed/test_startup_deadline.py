"""Start-up has a deadline of its own (``dist.startup_timeout_s``): starting the ranks and their
rendezvous, and a sampler worker's start-up (its process, the graph opened), run under it; the
run's deadline (``dist.timeout_s``) arms once every rank (every worker) is up. A slow start,
simulated for real (a rank that sleeps in start-up through the test hook
``GNNSCALE_TEST_START_DELAY``, a sampler worker that sleeps while it unpickles its sampler),
does not spend a short run deadline; a start-up that hangs is named with the start-up deadline.
The bounds on the time taken only tell a deadline that fires from one that never does."""

from __future__ import annotations

import time

import pytest
import torch
import torch.distributed as dist

from gnnscale.distributed import RankFailed
from gnnscale.distributed.launch import START_DELAY_ENV, spawn, start_delay
from gnnscale.distributed.schemas import LocalDistConfig
from gnnscale.errors import ConfigError
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.schedule import Schedule
from gnnscale.sampling.workers import SamplerPool, SamplerWorkerError

pytestmark = pytest.mark.slow  # multi-rank / subprocess tests: the slow tier


def summed(topo, pause_rank: int = -1, pause_s: float = 0.0) -> float:
    """An all-reduce of the ranks' numbers, ``pause_rank`` first pausing ``pause_s`` seconds
    after it has joined (the run's deadline is armed then)."""
    if topo.rank == pause_rank:
        time.sleep(pause_s)
    t = torch.tensor([float(topo.rank + 1)])
    dist.all_reduce(t)
    return t.item()


def test_the_start_delay_hook_reads_its_rank():
    env = {START_DELAY_ENV: "0:1.5, 3:20"}
    assert [start_delay(r, env) for r in range(4)] == [1.5, 0.0, 0.0, 20.0]
    assert start_delay(0, {}) == 0.0


def test_the_start_up_deadline_is_checked_with_the_config():
    LocalDistConfig(startup_timeout_s=30).check()
    with pytest.raises(ConfigError, match=r"dist.startup_timeout_s must lie in \(0, 604800\] "
                                          r"seconds .* got 0"):
        LocalDistConfig(startup_timeout_s=0).check()


def test_a_slow_start_up_does_not_spend_the_run_deadline(monkeypatch):
    """Rank 1 sleeps 6 s in start-up; the run's deadline is 3 s and does not fire (it did:
    the rendezvous ran under it), the start-up deadline is 300 s."""
    monkeypatch.setenv(START_DELAY_ENV, "1:6")
    start = time.monotonic()
    assert spawn(summed, 2, timeout_s=3, startup_timeout_s=300, grace_s=1) == [3.0, 3.0]
    assert time.monotonic() - start >= 6


def test_the_run_deadline_arms_once_every_rank_is_up(monkeypatch):
    """After a slow start (rank 0 sleeps 4 s), the 3 s run deadline still holds the
    collectives: rank 1 pausing 120 s after joining is named by it, long before the pause
    ends."""
    monkeypatch.setenv(START_DELAY_ENV, "0:4")
    start = time.monotonic()
    with pytest.raises(RankFailed) as err:
        spawn(summed, 2, 1, 120.0, timeout_s=3, startup_timeout_s=300, grace_s=1)
    msg = str(err.value)
    assert msg.startswith("rank 1 stopped answering") and "dist.timeout_s=3s" in msg, msg
    assert time.monotonic() - start < 100


def test_a_rank_hanging_in_start_up_is_named_with_the_start_up_deadline(monkeypatch):
    """Rank 1 hangs in start-up (sleeps 600 s before joining): its peer's rendezvous times out
    by the 3 s start-up deadline, and the launcher names rank 1 as the one that did not
    finish starting, not the peer that timed out."""
    monkeypatch.setenv(START_DELAY_ENV, "1:600")
    start = time.monotonic()
    with pytest.raises(RankFailed) as err:
        spawn(summed, 2, timeout_s=300, startup_timeout_s=3, grace_s=1)
    msg = str(err.value)
    assert msg.startswith("rank 1 did not finish starting: its process (pid ") and \
        "in its start-up; its peers' rendezvous timed out waiting for it " \
        "(dist.startup_timeout_s=3s)" in msg, msg
    assert "rank 0:" in msg and time.monotonic() - start < 120


def test_ranks_that_all_hang_in_start_up_are_named_by_the_launcher(monkeypatch):
    """Every rank hangs in start-up, so no peer times out to name one: the launcher's own
    start-up deadline does."""
    monkeypatch.setenv(START_DELAY_ENV, "0:600,1:600")
    start = time.monotonic()
    with pytest.raises(RankFailed) as err:
        spawn(summed, 2, timeout_s=300, startup_timeout_s=2, grace_s=1)
    msg = str(err.value)
    assert msg.startswith("rank 0 did not finish starting") and \
        "the launcher waited for it (dist.startup_timeout_s=2s)" in msg and "rank 1:" in msg, msg
    assert time.monotonic() - start < 120


class SlowStartSampler(NeighborSampler):
    """A neighbour sampler whose copy in a worker takes ``delay_s`` seconds to arrive (it
    sleeps while unpickled): a worker slow to start, as on a busy host."""

    def __init__(self, fanouts, delay_s: float) -> None:
        super().__init__(fanouts)
        self.delay_s = delay_s

    def __setstate__(self, state: dict) -> None:
        time.sleep(state["delay_s"])
        self.__dict__.update(state)


@pytest.fixture(scope="module")
def graph(saved_tiny_graph):
    """The tiny graph saved and loaded back (memory-mapped, knows its processed folder)."""
    return saved_tiny_graph


def _jobs(graph, n: int) -> list:
    schedule = Schedule(graph.train_idx, batch_size=64, seed=7, slots=1)
    return [(d.seeds, d.sample_seed) for d in schedule.draws(0, slots=[0])][:n]


def test_a_sampler_worker_slow_to_start_does_not_spend_the_run_deadline(graph):
    """The worker takes 5 s to start; the pool's run deadline is 2 s and does not fire (it
    did: a worker's start-up ran under it)."""
    with SamplerPool(SlowStartSampler([3], 5.0), graph, 1, poll_s=0.1, timeout_s=2,
                     startup_timeout_s=300) as pool:
        start = time.monotonic()
        got = list(pool.map(_jobs(graph, 2)))
        assert len(got) == 2 and time.monotonic() - start >= 4


def test_a_sampler_worker_hanging_in_start_up_is_named_with_the_start_up_deadline(graph):
    with SamplerPool(SlowStartSampler([3], 600.0), graph, 1, poll_s=0.1, timeout_s=300,
                     startup_timeout_s=2) as pool:
        start = time.monotonic()
        with pytest.raises(SamplerWorkerError, match=r"sampler worker 0 \(pid \d+\) did not "
                           r"finish starting \(opening the graph\) within 2 s, the start-up "
                           r"deadline \(dist.startup_timeout_s\): its process still runs"):
            list(pool.map(_jobs(graph, 1)))
        assert time.monotonic() - start < 120
