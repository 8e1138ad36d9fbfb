"""Launching ranks: the dead rank is named first, no rank outlives its launcher, temp files
stay in a folder that is removed, backend/device settings are checked before spawning."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gnnscale.distributed import RankFailed, launch, resolve_backend, spawn
from gnnscale.distributed.local import Launcher
from tests import _launch_fns

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_killed_rank_is_named_before_the_survivors_consequence(monkeypatch):
    # the launcher collects the survivors' reports for SETTLE_S after the first failure; on a
    # busy host rank 0's barrier may need longer than that to see its peer gone, so the window
    # here is wide: it still closes as soon as rank 0 has reported (the settle ends early)
    monkeypatch.setattr(launch, "SETTLE_S", 60.0)
    with pytest.raises(RankFailed) as err:
        spawn(_launch_fns.killed_after_barrier, 2, timeout_s=30, grace_s=3)
    msg = str(err.value)
    assert msg.startswith("rank 1 failed first (killed by signal SIGKILL)"), msg
    assert "then, as a consequence:\n  rank 0:" in msg


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/meminfo").exists(), reason="reads /proc")
@pytest.mark.parametrize("oom", [False, True])
def test_a_sigkilled_rank_is_named_with_the_memory_it_held(monkeypatch, tmp_path, oom):
    """A SIGKILLed rank is named with its resident memory and the host's least available; the
    out-of-memory killer is named only when the host's available memory fell under the share
    (``OOM_AVAILABLE_SHARE``: set above 1 here, so any host's memory reads as exhausted). The
    rank dies only once the launcher's own sampling has seen what it holds (no race with a
    busy host's scheduling)."""
    monkeypatch.setattr(launch, "SETTLE_S", 60.0)
    if oom:
        monkeypatch.setattr(launch, "OOM_AVAILABLE_SHARE", 1.01)
    seen = tmp_path / "seen"
    sample = launch._MemoryWatch.sample

    def sample_then_say(self):
        sample(self)
        if self.peak.get(1, 0) >= 300 * 2**20:
            seen.touch()

    monkeypatch.setattr(launch._MemoryWatch, "sample", sample_then_say)
    with pytest.raises(RankFailed) as err:
        spawn(_launch_fns.hold_then_killed, 2, 300, str(seen), timeout_s=120, grace_s=3)
    first, second = str(err.value).splitlines()[:2]
    assert first == "rank 1 failed first (killed by signal SIGKILL)", first
    held = re.fullmatch(r"it held up to ([\d.]+) GiB resident, the host's available memory "
                        r"fell to [\d.]+ of [\d.]+ GiB(: most likely .*)?", second)
    assert held and float(held.group(1)) >= 0.3, second
    assert ("out-of-memory killer" in second) == oom, second


@pytest.mark.slow
def test_bad_thread_count_reports_the_rank_traceback():
    with pytest.raises(RankFailed, match=r"(?s)rank \d failed first.*set_num_threads"):
        spawn(_launch_fns.killed_after_barrier, 2, timeout_s=30, grace_s=3,
              threads_per_rank=-2)


@pytest.mark.slow
def test_rank_temp_files_go_to_a_folder_that_is_removed():
    (folder, files), _ = spawn(_launch_fns.pyg_temp_files, 2, timeout_s=60)
    assert Path(folder).name.startswith("gnnscale-ranks-")
    assert any(f.endswith(".py") for f in files)  # PyG's generated propagate module
    assert not Path(folder).exists()


LAUNCHER = """
import sys
from gnnscale.distributed import spawn
from tests import _launch_fns
spawn(_launch_fns.train_forever, 2, sys.argv[1], timeout_s=60)
"""


def _start_launcher(pid_dir: Path) -> tuple[subprocess.Popen, list[int]]:
    proc = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(pid_dir)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    files = [pid_dir / f"rank{r}.pid" for r in range(2)]
    while not all(f.exists() and f.read_text() for f in files):
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "ranks did not start"
        time.sleep(0.1)
    return proc, [int(f.read_text()) for f in files]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _wait_gone(pids: list[int], within_s: float) -> list[int]:
    deadline = time.monotonic() + within_s
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP])
def test_no_rank_outlives_its_launcher(tmp_path, sig):
    proc, ranks = _start_launcher(tmp_path)
    try:
        proc.send_signal(sig)
        assert _wait_gone(ranks, 5.0) == [], f"ranks left running after {sig.name}"
        code = proc.wait(timeout=10)
        assert code != 0
        if sig != signal.SIGKILL:  # a clean stop: the launcher itself says why it ended
            assert code == 128 + sig
            assert f"stopped by {sig.name}" in proc.stdout.read()
    finally:
        proc.kill()
        for pid in ranks:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


STUCK_RANK = """
import ctypes, os, time
from gnnscale.distributed.guard import guard_rank
guard_rank(os.getppid(), grace_s=2.0)
try:
    print("ready", flush=True)
    time.sleep(120)
finally:  # native code that keeps the GIL (as a process group's destructor joining a thread
    ctypes.PyDLL(None).sleep(120)  # that waits for it): no Python code runs again
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX timers")
def test_a_rank_stuck_holding_the_gil_still_ends_after_its_grace():
    """A rank told to stop whose unwinding hangs in native code with the GIL held ends after
    its grace period: the watchdog thread cannot run then, the kernel's timer does."""
    proc = subprocess.Popen([sys.executable, "-c", STUCK_RANK], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        assert time.monotonic() - t0 < 10
        assert proc.returncode == -signal.SIGALRM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_nccl_on_a_cpu_host_names_the_backend_setting():
    with pytest.raises(ValueError, match="dist.backend=nccl needs CUDA.*dist.backend=gloo"):
        resolve_backend("nccl", "auto", cuda_available=False)
    with pytest.raises(ValueError, match="dist.device=cuda .*dist.device=cpu"):
        resolve_backend("auto", "cuda", cuda_available=False)
    assert resolve_backend("auto", "auto", cuda_available=False) == ("gloo", "cpu")
    assert resolve_backend("auto", "auto", cuda_available=True) == ("nccl", "cuda")
    assert resolve_backend("gloo", "auto", cuda_available=True) == ("gloo", "cpu")


@pytest.mark.parametrize("kwargs, key", [({"timeout_s": 0}, "dist.timeout_s"),
                                         ({"threads_per_rank": -1}, "dist.threads_per_rank"),
                                         ({"backend": "mpi"}, "dist.backend")])
def test_launcher_checks_its_settings_before_spawning(kwargs, key):
    with pytest.raises(ValueError, match=key):
        Launcher(**kwargs)


def test_bad_backend_fails_at_composition(tmp_path):
    from hydra.errors import ConfigCompositionException

    from tests._train import make_cfg

    with pytest.raises(ConfigCompositionException) as err:
        make_cfg(tmp_path, "dist.backend=mpi")
    assert "auto, gloo, nccl" in str(err.value.__cause__)
