"""Nothing left behind in the system temp folder: a run keeps its temp files in a private folder
removed at its exit; a killed run's folder is removed by the next run; the test session has
its own folder too (tests/conftest.py)."""

import getpass
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from gnnscale.distributed.guard import RUN_TEMP_PREFIX, remove_stale_temp_dirs, run_temp_dir
from tests._train import TINY

ROOT = Path(__file__).resolve().parents[2]
#: torch's compile cache: one per user, kept across runs on purpose (`import torch_geometric`
#: makes it)
CACHES = {f"torchinductor_{getpass.getuser()}"}


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_session_writes_to_its_own_folder(tmp_path):
    here = tempfile.gettempdir()
    assert Path(here).name.startswith(f"{RUN_TEMP_PREFIX}{os.getpid()}-")
    assert os.environ["TMPDIR"] == here == run_temp_dir()
    assert Path(here) not in tmp_path.parents  # tmp_path stays where pytest keeps it


def test_only_folders_of_dead_processes_are_removed(tmp_path):
    dead, alive = _dead_pid(), os.getpid()
    stale = tmp_path / f"{RUN_TEMP_PREFIX}{dead}-abc"
    live = tmp_path / f"{RUN_TEMP_PREFIX}{alive}-abc"
    mine = tmp_path / "pymp-stale"  # the dead run's multiprocessing folder, recorded by it
    other = tmp_path / "pymp-other"  # someone else's
    unrelated = tmp_path / f"gnnscale-data-{dead}-abc"
    for d in (stale, live, mine, other, unrelated):
        d.mkdir()
    (stale / "file.py").write_text("")
    (stale / ".also-remove").write_text(f"{mine}\n{tmp_path.parent / 'outside'}\n")
    removed = remove_stale_temp_dirs(str(tmp_path))
    assert sorted(removed) == sorted([str(stale), str(mine)])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [live.name, other.name, unrelated.name])


def _env(temp: Path) -> dict:
    return {**os.environ, "TMPDIR": str(temp), "PYTHONUNBUFFERED": "1"}


def _left(temp: Path) -> list[str]:
    return sorted(set(os.listdir(temp)) - CACHES)


@pytest.mark.slow
@pytest.mark.parametrize("world", [1, 2])
def test_train_leaves_nothing_in_the_temp_folder(tmp_path, world):
    temp = tmp_path / "tmp"
    temp.mkdir()
    cmd = [sys.executable, "train.py", *TINY, "epochs=1", f"dist.world_size={world}",
           f"run_dir={tmp_path / 'run'}", f"data_root={tmp_path / 'data'}"]
    out = subprocess.run(cmd, cwd=ROOT, env=_env(temp), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert _left(temp) == []


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_killed_launchers_folder_is_removed_by_the_next_run(tmp_path):
    """SIGKILL a 2-rank train.py mid-run: its folder (the ranks' folder, the fork server's
    socket folder) stays behind until the next run starts, which removes it."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    common = [sys.executable, "train.py", *TINY, "dist.world_size=2",
              f"data_root={tmp_path / 'data'}"]
    proc = subprocess.Popen([*common, "epochs=100000", f"run_dir={tmp_path / 'killed'}"],
                            cwd=ROOT, env=_env(temp), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "killed" / "metrics.jsonl").exists():  # ranks are training
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "no epoch finished in 120 s"
            time.sleep(0.2)
        proc.kill()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = _left(temp)
    assert any(n.startswith(f"{RUN_TEMP_PREFIX}{proc.pid}-") for n in left), left
    deadline = time.monotonic() + 15  # its ranks end within seconds (they write there too)
    while any(_rank_alive(p) for p in _pids_using(temp)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in _pids_using(temp) if _rank_alive(p)], "a rank outlived its launcher"
    out = subprocess.run([*common, "epochs=1", f"run_dir={tmp_path / 'next'}"], cwd=ROOT,
                         env=_env(temp), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert _left(temp) == []


def _pids_using(folder: Path) -> list[int]:
    """Processes whose ``$TMPDIR`` (at start) lies in ``folder``: the killed run's ranks."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if any(v.startswith(f"TMPDIR={folder}".encode()) for v in env) and entry.name.isdigit():
            pids.append(int(entry.name))
    return pids


def _rank_alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
