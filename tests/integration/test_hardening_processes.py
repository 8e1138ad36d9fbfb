"""Processes and sockets of a run (issue 39): no wait on a sampler worker without a deadline,
socket paths that fit AF_UNIX however deep the temp folder, no worker outliving its rank, the
fork server's death said as such, Ctrl-C in one line, every listener of a single-host run on
loopback."""

from __future__ import annotations

import getpass
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from multiprocessing import process
from pathlib import Path

import pytest

from gnnscale.distributed import guard
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.workers import SamplerPool, SamplerWorkerError
from tests._sampler_fns import UnsendableSampler

ROOT = Path(__file__).resolve().parents[2]
LINUX = sys.platform.startswith("linux")


@pytest.fixture(scope="module")
def graph(saved_tiny_graph):
    """The tiny graph saved and loaded back (memory-mapped, knows its processed folder)."""
    return saved_tiny_graph


def _jobs(graph, n: int) -> list:
    return [(graph.train_idx[i * 8:(i + 1) * 8], i) for i in range(n)]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def _gone(pids, within: float) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if all(_state(p) in ("gone", "Z") for p in pids):
            return True
        time.sleep(0.1)
    return False


# -- sockets: short and checked ---------------------------------------------------------------
def test_socket_dir_falls_back_to_a_short_folder_or_refuses(tmp_path, monkeypatch):
    """A temp folder too long for AF_UNIX sockets: a private folder in a short base instead,
    removed at exit; with no short base usable, one clear refusal naming TMPDIR."""
    long_dir = tmp_path / ("d" * 100)
    long_dir.mkdir()
    config = process.current_process()._config
    monkeypatch.setitem(config, "tempdir", None)
    monkeypatch.setattr(tempfile, "tempdir", str(long_dir))
    assert not guard.socket_room(str(long_dir))
    folder = guard.socket_dir()
    assert guard.socket_room(folder) and os.path.isdir(folder)
    assert os.path.dirname(folder) in guard.SHORT_BASES
    assert os.path.basename(folder).startswith(f"{guard.RUN_TEMP_PREFIX}{os.getpid()}-")
    assert guard.socket_dir() == folder  # kept for the process (and inherited); at exit
    # it is removed (util.Finalize), and after a SIGKILL by the next run (its lock is free)
    monkeypatch.setitem(config, "tempdir", None)
    monkeypatch.setattr(guard, "SHORT_BASES", (str(long_dir),))
    with pytest.raises(guard.SocketPathError, match=r"too long .* set TMPDIR to a shorter"):
        guard.socket_dir()


@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="the 107-byte AF_UNIX limit of Linux")
def test_workers_sample_under_a_deep_temp_folder(graph, tmp_path):
    """TMPDIR 40+ characters deep, nested twice as a 1-rank run nests it: the workers' results
    used to fail to send (AF_UNIX path too long) and the pool waited for ever."""
    long_tmp = tmp_path / ("t" * 40)
    long_tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(long_tmp)}
    proc = subprocess.run([sys.executable, "-m", "tests._sampler_fns", "nested",
                           graph.meta["processed_dir"]], cwd=ROOT, env=env, timeout=90,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    sockets, temp = proc.stdout.split()
    assert len(temp) + guard.SOCKET_NAME_LEN > guard.SUN_PATH_MAX  # the case at hand
    assert guard.socket_room(sockets) and not os.path.exists(sockets)  # used, then removed
    assert os.listdir(long_tmp) == [], "left in the temp folder"


# -- deadlines, named workers -----------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="reads /proc")
def test_a_stopped_worker_is_named_at_the_deadline_and_stopped(graph):
    with SamplerPool(NeighborSampler([3]), graph, 2, timeout_s=60, poll_s=0.2) as pool:
        list(pool.map(_jobs(graph, 2)))  # both started (a loaded host: counted apart)
        pool.timeout_s = 3
        os.kill(pool.pids[1], signal.SIGSTOP)
        start = time.monotonic()
        with pytest.raises(SamplerWorkerError, match=r"sampler worker 1 \(pid \d+\) sent no "
                           r"result for job 1 within 3 s.*is stopped \(state T"):
            list(pool.map(_jobs(graph, 4)))
        assert time.monotonic() - start < 10
        pids = pool.pids
    assert _gone(pids, 10), "a stopped worker outlived its pool"


@pytest.mark.slow
def test_a_result_the_worker_cannot_send_is_an_error_not_a_lost_job(graph):
    with SamplerPool(UnsendableSampler([3]), graph, 1, timeout_s=300) as pool:
        start = time.monotonic()
        with pytest.raises(SamplerWorkerError, match=r"worker 0 failed on job 0:\n"):
            list(pool.map(_jobs(graph, 2)))
        assert time.monotonic() - start < 200  # at once, not at the deadline (start-up in)


@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="reads /proc")
def test_a_stopped_worker_of_a_killed_rank_dies_with_it(graph, tmp_path):
    """The rank dies without closing its pool while worker 0 is stopped: the worker (death
    signal SIGKILL, which a stopped process obeys) and the resource tracker end at once."""
    pid_file = tmp_path / "pids"
    proc = subprocess.run([sys.executable, "-m", "tests._sampler_fns",
                           graph.meta["processed_dir"], str(pid_file), "stop"], cwd=ROOT,
                          timeout=90, capture_output=True, text=True)
    assert proc.returncode == 3, proc.stderr
    pids = [int(p) for p in pid_file.read_text().split()]
    assert len(pids) == 3
    try:
        assert _gone(pids, 10), {p: _state(p) for p in pids}
    finally:
        for p in pids:
            if _state(p) not in ("gone", "Z"):
                os.kill(p, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="reads /proc")
def test_two_ranks_name_the_stopped_worker_within_the_deadline(graph, tmp_path):
    """Rank 0's worker stopped: rank 0 names it at the run's deadline, and the launcher names
    rank 0 first (rank 1's barrier timing out is the consequence). The deadline leaves room
    for the workers' start on a loaded host; the wait itself takes no CPU."""
    from gnnscale.distributed import RankFailed, spawn
    from tests._sampler_fns import stopped_worker_rank

    stamp = tmp_path / "stopped_at"
    with pytest.raises(RankFailed) as err:
        spawn(stopped_worker_rank, 2, graph.meta["processed_dir"], str(stamp), timeout_s=12,
              grace_s=2)
    took = time.time() - float(stamp.read_text())
    msg = str(err.value)
    assert msg.startswith("rank 0 failed first"), msg
    assert "sampler worker 0 (pid" in msg and "is stopped (state T" in msg, msg
    assert took < 12 + 10, took  # the deadline and a little, from the SIGSTOP


# -- the fork server's death, said as such ----------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="a fork server and /proc")
def test_a_killed_fork_server_is_named_not_exit_code_255(tmp_path):
    """SIGKILL the fork server under two running ranks: the ranks end with it (their death
    signal) and the launcher says the fork server was killed, not "exit code 255"; the next
    launch starts a new server."""
    import threading
    from multiprocessing import forkserver

    from gnnscale.distributed import RankFailed, spawn
    from tests._launch_fns import train_forever

    def kill_server_when_ranks_run() -> None:
        end = time.monotonic() + 120
        while len(list(tmp_path.glob("rank*.pid"))) < 2 and time.monotonic() < end:
            time.sleep(0.1)
        os.kill(forkserver._forkserver._forkserver_pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_server_when_ranks_run, daemon=True)
    killer.start()
    with pytest.raises(RankFailed) as err:
        spawn(train_forever, 2, str(tmp_path), timeout_s=30, grace_s=2)
    killer.join(timeout=5)
    msg = str(err.value)
    assert msg.startswith("the fork server that started the ranks (pid "), msg
    assert "was killed by signal SIGKILL; the ranks it started end with it" in msg, msg
    assert "exit code 255" not in msg, msg
    ranks = [int(p.read_text()) for p in tmp_path.glob("rank*.pid")]
    assert _gone(ranks, 15), {p: _state(p) for p in ranks}
    assert spawn(_rank_of, 2, timeout_s=60) == [0, 1]  # a new server


def _rank_of(topo):
    return topo.rank


# -- Ctrl-C -----------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="reads /proc")
@pytest.mark.parametrize("world", [1, 2])
def test_ctrl_c_is_one_line_exit_130_and_leaves_nothing(tmp_path, world):
    """Ctrl-C (SIGINT to the launcher's whole process group, as a terminal sends it) during
    training, with sampler workers: one line, exit 130, no traceback; every rank, worker and
    temp file gone."""
    from tests._train import TINY, descendants

    temp = tmp_path / "tmp"
    temp.mkdir()
    run = tmp_path / "run"
    cmd = [sys.executable, "train.py", *TINY, "epochs=100000", f"dist.world_size={world}",
           "strategy.sample_workers=1", f"run_dir={run}", f"data_root={tmp_path / 'data'}",
           "progress=false", "checkpoint=false"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "TMPDIR": str(temp)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        end = time.monotonic() + 240
        while not (run / "metrics.jsonl").exists() and time.monotonic() < end:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        family = descendants(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # a hang: say where every thread waits
            pytest.fail("the run did not exit within 60 s of Ctrl-C:\n"
                        + _where_they_wait([proc.pid, *family]))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, err
    for text in (out, err):
        assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    said = {1: "gnnscale: interrupted",  # the rank is the launcher
            2: "gnnscale: launcher stopped by SIGINT; stopping the ranks"}[world]
    assert err.strip().splitlines()[-1] == said, err
    assert _gone(family, 15), {p: _state(p) for p in family}
    assert set(os.listdir(temp)) <= {f"torchinductor_{getpass.getuser()}"}


def _where_they_wait(pids: list[int]) -> str:
    """Each process's threads, their kernel wait channel and state, and (py-spy on PATH or
    beside the interpreter) their Python stacks: what a hung run was doing."""
    import shutil

    lines = []
    spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    for pid in pids:
        lines.append(f"pid {pid}: {_state(pid)}")
        try:
            for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
                base = f"/proc/{pid}/task/{tid}"
                wchan = Path(f"{base}/wchan").read_text().strip()
                comm = Path(f"{base}/comm").read_text().strip()
                state = Path(f"{base}/stat").read_text().rsplit(")", 1)[1].split()[0]
                lines.append(f"  thread {tid} {comm}: state {state}, waits in {wchan or '-'}")
        except OSError as err:
            lines.append(f"  ({err})")
        if spy:
            got = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True,
                                 text=True, timeout=30)
            lines.append(got.stdout + got.stderr)
    return "\n".join(lines)


# -- every listener where the run is ----------------------------------------------------------
def _network_interface() -> str | None:
    """A non-loopback interface with an IPv4 address, None when the host has none."""
    psutil = pytest.importorskip("psutil")
    for name, addrs in psutil.net_if_addrs().items():
        for a in addrs:
            if a.family == socket.AF_INET and not ipaddress.ip_address(a.address).is_loopback:
                return name
    return None


@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="gloo's interface by name, read with ioctl")
@pytest.mark.parametrize("world", [1, 2])
def test_every_listener_of_a_single_host_run_is_on_loopback(monkeypatch, world):
    """gloo's pair listeners bound where the host name resolves (seen: 127.0.0.2) or to the
    interface the environment names; a single-host run's listeners (store, gloo, every rank,
    a subgroup too) are on 127.0.0.0/8 even when GLOO_SOCKET_IFNAME names the network."""
    from gnnscale.distributed.local import Launcher
    from tests._launch_fns import listening_addresses

    name = _network_interface()
    if name is None:
        pytest.skip("no network interface to be tempted by")
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", name)  # a user's setting for another job
    per_rank = Launcher(world_size=world, timeout_s=60).launch(listening_addresses)
    assert len(per_rank) == world and all(per_rank), per_rank
    off = [ip for ips in per_rank for ip in ips if not ipaddress.ip_address(ip).is_loopback]
    assert off == [], per_rank
    assert os.environ["GLOO_SOCKET_IFNAME"] == name  # the launcher's own environment kept


def test_listener_interface_of_a_multi_host_run_is_the_networks(monkeypatch):
    """A multi-host run's listeners go to the interface holding the address this host
    reaches MASTER_ADDR from; none holding it is a clear error."""
    from gnnscale.distributed import device

    lo = device.interface_of("127.0.0.1")
    assert device.listener_env() == {"GLOO_SOCKET_IFNAME": lo, "NCCL_SOCKET_IFNAME": lo}
    assert device.listener_env("localhost") == device.listener_env()
    name = _network_interface() if LINUX else None
    if name is None:
        pytest.skip("no network interface")
    import psutil

    own = next(a.address for a in psutil.net_if_addrs()[name] if a.family == socket.AF_INET)
    assert device.interface_of(own) == name and device.source_address(own) == own
    assert device.listener_env(own) == {"GLOO_SOCKET_IFNAME": name, "NCCL_SOCKET_IFNAME": name}
    monkeypatch.setattr(device, "interface_of", lambda addr: None)
    with pytest.raises(ValueError, match="no network interface of this host holds"):
        device.listener_env(own)


@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="a fork server and /proc")
def test_a_stopped_rank_ends_with_its_sigkilled_launcher(tmp_path):
    """SIGSTOP rank 1, SIGKILL the launcher: the fork server's exit continues the stopped rank
    (its parent-death SIGTERM was pending, stopped, for ever: seen alive 20 s later)."""
    from tests.integration.test_rank_failures import _start_launcher

    proc, ranks = _start_launcher(tmp_path)
    try:
        os.kill(ranks[1], signal.SIGSTOP)
        while _state(ranks[1]) not in ("T", "t", "gone"):
            time.sleep(0.05)
        proc.kill()
        proc.wait(timeout=30)  # its ranks hold its output pipe while they live
        assert _gone(ranks, 15), {p: _state(p) for p in ranks}
    finally:
        for p in ranks:
            if _state(p) not in ("gone", "Z"):
                os.kill(p, signal.SIGKILL)
        proc.stdout.close()
