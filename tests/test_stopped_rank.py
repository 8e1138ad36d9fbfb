"""No collective without a deadline: a rank that stops answering (SIGSTOP) ends the run within
``dist.timeout_s`` and a few seconds, non-zero, and the launcher names that rank."""

import os
import signal
import sys
import time
from pathlib import Path

import pytest
import torch.distributed as dist

from gnnscale.distributed import RankFailed, spawn
from gnnscale.distributed.collectives import new_group
from gnnscale.runner.run import run
from tests._train import act_when_training, make_cfg

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

TIMEOUT_S = 20
COMMON = ("dataset=synthetic", "dataset.preset=tiny", "model.hidden=32", "model.num_layers=2",
          "eval_batch_size=512", "logger=none", "epochs=100000",
          "dist.world_size=2", f"dist.timeout_s={TIMEOUT_S}")
MINI = ("sampler.fanouts=[5,5]", "strategy.batch_size=128")
STRATEGIES = {
    "data": MINI,
    "split": ("strategy=split", *MINI),
    "factored": ("strategy=factored", "strategy.samplers=1", *MINI),  # rank 1 samples
    "fullgraph": ("strategy=fullgraph",),
    "offload": ("strategy=offload",),
}


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _alive(pid: int) -> bool:
    try:
        return _stat(pid)[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def stop_in_a_subgroup(topo, stopper):
    """Rank ``stopper`` stops itself between two barriers of a subgroup (a rank function)."""
    group = new_group([0, 1])
    dist.barrier(group=group)
    if topo.rank == stopper:
        os.kill(os.getpid(), signal.SIGSTOP)
    dist.barrier(group=group)


@pytest.mark.parametrize("stopper", [1, 0])  # rank 0 also serves the store
def test_a_subgroup_has_the_runs_deadline(stopper):
    """A subgroup's collective ends after dist.timeout_s (not PyTorch's 30 minutes), and the
    launcher names the stopped rank, not the one that timed out."""
    start = time.monotonic()
    with pytest.raises(RankFailed) as err:
        spawn(stop_in_a_subgroup, 2, stopper, timeout_s=3, grace_s=2)
    msg = str(err.value)
    assert msg.startswith(f"rank {stopper} stopped answering: its process"), msg
    assert "is stopped (state T" in msg and "dist.timeout_s=3s" in msg, msg
    assert f"then, as a consequence:\n  rank {1 - stopper}: RuntimeError:" in msg, msg
    assert "Timed out" in msg, msg
    assert time.monotonic() - start < 20


def stuck_outside_the_collective(topo):
    """Rank 1 sleeps (state S) instead of joining the barrier (a rank function)."""
    dist.barrier()
    if topo.rank == 1:
        time.sleep(120)
    dist.barrier()


def test_a_rank_that_did_not_time_out_is_named():
    """Not stopped, just absent: the rank that did not itself time out is the one named."""
    start = time.monotonic()
    with pytest.raises(RankFailed) as err:
        spawn(stuck_outside_the_collective, 2, timeout_s=3, grace_s=1)
    msg = str(err.value)
    assert msg.startswith("rank 1 stopped answering: its process"), msg
    assert "still runs (state S) but not in the collective" in msg, msg
    assert "then, as a consequence:\n  rank 0: RuntimeError:" in msg, msg
    assert time.monotonic() - start < 20


@pytest.mark.slow  # end to end through the runner, five times
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_stopped_rank_is_named_and_ends_the_run(tmp_path, strategy):
    """SIGSTOP rank 1 mid-run: its peer's collective times out after dist.timeout_s, the
    launcher ends every rank and raises naming rank 1, all within 60 s (in this process,
    through its warm fork server; train.py turns the error into a non-zero status)."""
    cfg = make_cfg(tmp_path, *COMMON, *STRATEGIES[strategy])
    seen: dict = {}

    def stop(ranks: list[int]) -> None:
        seen["ranks"] = ranks
        if len(ranks) == 2:
            os.kill(ranks[1], signal.SIGSTOP)  # the forked ranks start in rank order
            seen["stopped"] = time.monotonic()

    watcher = act_when_training(Path(cfg.run_dir), stop)
    try:
        with pytest.raises(RankFailed) as err:
            run(cfg)
        took = time.monotonic() - seen.get("stopped", time.monotonic())
    finally:
        watcher.join(timeout=5)
        for pid in seen.get("ranks", []):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
                os.kill(pid, signal.SIGCONT)
    assert len(seen["ranks"]) == 2, seen
    assert str(err.value).startswith("rank 1 stopped answering"), str(err.value)
    assert took < 60, f"the run took {took:.0f} s to end after the SIGSTOP\n{err.value}"
    assert [p for p in seen["ranks"] if _alive(p)] == [], "a rank outlived the run"
