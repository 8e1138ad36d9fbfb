"""No collective without a deadline: a rank that stops answering (SIGSTOP) ends the run within
``dist.timeout_s`` and a few seconds, non-zero, and the launcher names that rank."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch.distributed as dist

from gnnscale.distributed import RankFailed, spawn
from gnnscale.distributed.collectives import new_group
from tests._train import rank_pids

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

ROOT = Path(__file__).resolve().parents[2]

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


def _stamp(path: str) -> None:
    """Write the time now to ``path``: when the failure under test began."""
    Path(path).write_text(repr(time.time()))


def _since(path: Path) -> float:
    """Seconds since the time :func:`_stamp` wrote to ``path``: the ranks' start-up, which a
    busy host slows, is not counted against the deadline under test."""
    return time.time() - float(path.read_text())


def stop_in_a_subgroup(topo, stopper, stamp):
    """Rank ``stopper`` stops itself between two barriers of a subgroup (a rank function)."""
    group = new_group([0, 1])
    dist.barrier(group=group)
    if topo.rank == stopper:
        _stamp(stamp)
        os.kill(os.getpid(), signal.SIGSTOP)
    dist.barrier(group=group)


@pytest.mark.parametrize("stopper", [1, 0])  # rank 0 also serves the store
def test_a_subgroup_has_the_runs_deadline(stopper, tmp_path):
    """A subgroup's collective ends after dist.timeout_s (not PyTorch's 30 minutes), and the
    launcher names the stopped rank, not the one that timed out."""
    with pytest.raises(RankFailed) as err:
        spawn(stop_in_a_subgroup, 2, stopper, str(tmp_path / "t"), timeout_s=3, grace_s=2)
    msg = str(err.value)
    assert msg.startswith(f"rank {stopper} stopped answering: its process"), msg
    assert "is stopped (state T" in msg and "dist.timeout_s=3s" in msg, msg
    assert f"then, as a consequence:\n  rank {1 - stopper}: RuntimeError:" in msg, msg
    assert "Timed out" in msg, msg
    assert _since(tmp_path / "t") < 3 + 2 + 25  # the deadline and the grace, not 30 minutes


def stuck_outside_the_collective(topo, stamp):
    """Rank 1 sleeps (state S) instead of joining the barrier (a rank function)."""
    dist.barrier()
    if topo.rank == 1:
        _stamp(stamp)
        time.sleep(120)
    dist.barrier()


def test_a_rank_that_did_not_time_out_is_named(tmp_path):
    """Not stopped, just absent: the rank that did not itself time out is the one named."""
    with pytest.raises(RankFailed) as err:
        spawn(stuck_outside_the_collective, 2, str(tmp_path / "t"), timeout_s=3, grace_s=1)
    msg = str(err.value)
    assert msg.startswith("rank 1 stopped answering: its process"), msg
    assert "still runs (state S) but not in the collective" in msg, msg
    assert "then, as a consequence:\n  rank 0: RuntimeError:" in msg, msg
    assert _since(tmp_path / "t") < 3 + 1 + 25  # the deadline and the grace, not 120 s


@pytest.mark.slow  # end to end, the five strategies' runs side by side
def test_a_stopped_rank_is_named_and_ends_the_run_in_every_strategy(tmp_path):
    """SIGSTOP rank 1 of a 2-rank train.py of each strategy mid-run: its peer's collective
    times out after dist.timeout_s, the launcher ends every rank and exits non-zero naming
    rank 1, all within 60 s of the SIGSTOP. The five runs wait out their deadlines side by
    side (a stopped rank takes no CPU)."""
    procs, stopped, ended = {}, {}, {}
    for name, extra in STRATEGIES.items():
        cmd = [sys.executable, "train.py", *COMMON, *extra, f"run_dir={tmp_path / name}",
               f"data_root={tmp_path / 'data'}", "progress=false", "checkpoint=false"]
        procs[name] = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        while len(ended) < len(procs) and time.monotonic() < deadline:
            for name, proc in procs.items():
                if name in ended:
                    continue
                if proc.poll() is not None:
                    ended[name] = time.monotonic()
                elif name not in stopped and (tmp_path / name / "metrics.jsonl").exists():
                    ranks = rank_pids(proc.pid)
                    if len(ranks) == 2:  # the forked ranks start in rank order
                        os.kill(ranks[1], signal.SIGSTOP)
                        stopped[name] = (time.monotonic(), ranks)
            time.sleep(0.1)
    finally:
        outs = {}
        for name, proc in procs.items():
            if proc.poll() is None:
                proc.kill()
            outs[name] = proc.communicate(timeout=30)[0]
        for _, ranks in stopped.values():
            for pid in ranks:
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)
                    os.kill(pid, signal.SIGCONT)
    for name, proc in procs.items():
        assert name in stopped, f"{name}: no epoch finished\n{outs[name]}"
        assert name in ended, f"{name}: still running 240 s after start\n{outs[name]}"
        took = ended[name] - stopped[name][0]
        assert proc.returncode != 0, outs[name]
        assert "rank 1 stopped answering" in outs[name], outs[name]
        assert took < 60, f"{name}: the run took {took:.0f} s to end after the SIGSTOP"
        assert [p for p in stopped[name][1] if _alive(p)] == [], f"{name}: a rank outlived it"
