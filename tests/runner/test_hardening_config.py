"""Issue 39, config side: values bounded at launch, one run per run folder, a misspelt option
named with the closest ones, sweeps that survive a bad job, embed's command line; issue 40.4:
ranks' OpenMP threads sleep when they wait."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gnnscale.distributed import threads
from gnnscale.embed.__main__ import main as embed_main
from gnnscale.errors import ConfigError
from gnnscale.runner import cli
from gnnscale.runner.run import run
from gnnscale.runner.runlock import LOCK_NAME, run_folder_lock
from gnnscale.runner.validate import check_config
from tests._train import TINY, make_cfg

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("override, says", [
    ("dist.timeout_s=1e10", "dist.timeout_s must lie in (0, 604800] seconds"),
    ("dist.timeout_s=1e15", "dist.timeout_s must lie in (0, 604800] seconds"),
    ("seed=99999999999999999999999", "seed must lie in [0, 4294967295]"),
    ("seed=-1", "seed must lie in [0, 4294967295]"),
    ("dist.threads_per_rank=100000", "this host's cores"),
])
def test_unbounded_values_are_refused_at_launch(tmp_path, override, says):
    with pytest.raises(ConfigError, match=r"got ") as err:
        check_config(make_cfg(tmp_path, *TINY, override))
    assert says in str(err.value) and "\n" not in str(err.value)


def test_values_at_the_bounds_pass(tmp_path):
    check_config(make_cfg(tmp_path, *TINY, "dist.timeout_s=604800", "seed=4294967295",
                          f"dist.threads_per_rank={os.cpu_count()}"))


def test_a_cache_budget_beside_cache_none_is_a_note(tmp_path, capsys):
    """The README's sweep sets a ratio beside cache=none: harmless, so not refused."""
    check_config(make_cfg(tmp_path, *TINY, "cache=none", "cache.ratio=0.1"))
    assert "note: cache.ratio=0.1 has no effect with cache=none" in capsys.readouterr().out


def test_embed_bad_argument_is_one_line_status_2(capsys):
    with pytest.raises(SystemExit) as err:
        embed_main(["run_dir=x", "layers=1"])
    assert err.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: unknown argument 'layers=1'"), lines


@pytest.mark.parametrize("argv, says", [
    (["strategy=fulgraph"], "strategy=fulgraph is not an option of strategy: did you mean "
                            "fullgraph?"),
    (["dataset=corra"], "did you mean cora?"),
    (["-m", "model=sage,gcnn"], "model=gcnn is not an option of model: did you mean gcn"),
])
def test_a_misspelt_option_names_the_closest(argv, says):
    with pytest.raises(ConfigError) as err:
        cli.check_options(cli.split_argv(argv)[0])
    assert says in str(err.value) and "\n" not in str(err.value)


def test_real_options_and_other_keys_pass():
    cli.check_options(["strategy=fullgraph", "dataset=cora,citeseer", "experiment=null",
                       "model.hidden=3", "+foo=bar", "experiment=recipe/shchur_gcn"])


def test_sweep_jobs_refused_before_any_trains(tmp_path):
    """The README's sweep passes whole; a refused job is named by what it sweeps."""
    readme = cli.sweep_jobs(["cache=none,degree,presample", "cache.ratio=0.1,0.25"])
    assert len(readme) == 6 and cli.preflight(readme, check_config) == {}
    jobs = cli.sweep_jobs([f"hydra.sweep.dir={tmp_path}", "model.hidden=0,16", *TINY[1:2]])
    refused = cli.preflight(jobs, check_config)
    assert list(refused.values()) == [
        ("#0 (model.hidden=0)", "error: job #0 (model.hidden=0): model.hidden must be >= 1, "
                                "got 0")]
    with pytest.raises(ConfigError, match=r"job #1 \(model=gcn\) does not compose"):
        cli.preflight(cli.sweep_jobs(["model=sage,gcn", "model.aggr=max"]), check_config)


HOLD = ("import sys, time; from gnnscale.runner.runlock import run_folder_lock\n"
        "with run_folder_lock(sys.argv[1]):\n    print('held', flush=True); time.sleep(600)\n")


def test_one_run_folder_one_run(tmp_path):
    """A second run given a locked folder is refused naming the holder; the lock dies with its
    holder (SIGKILL), a run ends leaving no lock file, and resuming in the folder works."""
    cfg = make_cfg(tmp_path, *TINY, "epochs=1", "dist.world_size=1")
    folder = Path(cfg.run_dir)
    folder.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError) as err:
            run(cfg)
        assert f"in use by process {holder.pid} on {socket.gethostname()}" in str(err.value)
        assert not (folder / "metrics.jsonl").exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    run(cfg)
    assert not (folder / LOCK_NAME).exists()
    res = run(make_cfg(tmp_path, *TINY, "epochs=2", "dist.world_size=1", "resume=true"))
    assert len(res["history"]) == 2 and not (folder / LOCK_NAME).exists()


def test_the_lock_is_reentrant_in_one_process(tmp_path):
    with run_folder_lock(tmp_path), run_folder_lock(tmp_path):
        assert (tmp_path / LOCK_NAME).read_text().split()[0] == str(os.getpid())
    assert not (tmp_path / LOCK_NAME).exists()


def _train(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "train.py", *args, f"data_root={tmp_path / 'data'}",
                           "dataset.preset=tiny", "dist.world_size=1", "progress=false"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.slow
def test_a_sweep_survives_a_bad_job(tmp_path):
    """Refused jobs named before any trains, a diverging job reported, the others trained, a
    summary and status 1 at the end; a refused job leaves no folder."""
    t0 = time.monotonic()
    proc = _train(tmp_path, "-m", f"hydra.sweep.dir={tmp_path / 'sw'}", "epochs=3",
                  "model.hidden=0,32", "optim.lr=0.01,1e30")
    err = proc.stderr
    assert proc.returncode == 1, err[-3000:]
    first = err.index("error: job #0 (model.hidden=0 optim.lr=0.01): model.hidden must be >= 1")
    assert first < err.index("error: job #1 (model.hidden=0 optim.lr=1e+30)") \
        < err.index("sweep: 2 of 4 jobs refused; training the other 2")
    assert "error: job #3 (model.hidden=32 optim.lr=1e+30) failed while training: " \
           "FloatingPointError" in err
    assert err.strip().splitlines()[-1] == (
        "sweep: 1 of 4 jobs trained; refused: #0 (model.hidden=0 optim.lr=0.01), #1 "
        "(model.hidden=0 optim.lr=1e+30); failed while training: #3 (model.hidden=32 "
        "optim.lr=1e+30)")
    assert (tmp_path / "sw" / "2" / "results.json").is_file()
    assert not (tmp_path / "sw" / "0").exists() and not (tmp_path / "sw" / "1").exists()
    assert time.monotonic() - t0 < 240


@pytest.mark.slow
def test_a_misspelt_option_on_the_command_line(tmp_path):
    proc = _train(tmp_path, "strategy=fulgraph")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: strategy=fulgraph is not an option of strategy: did you mean fullgraph? "
        "(options: auto, data, factored, fullgraph, offload, split)"]


# -- issue 40.4: no cliff on a busy host ------------------------------------------------------

def test_quiet_waits_sets_passive_unless_the_user_chose():
    env: dict = {}
    assert threads.quiet_waits(env) and env == {"OMP_WAIT_POLICY": "PASSIVE"}
    for chosen in ({"OMP_WAIT_POLICY": "ACTIVE"}, {"GOMP_SPINCOUNT": "300000"}):
        env = dict(chosen)
        assert not threads.quiet_waits(env) and env == chosen


WARM = ("import os, sys\nfrom multiprocessing import forkserver\n"
        "from gnnscale.runner.warm import warm_fork_server, stop_fork_server\n"
        "assert warm_fork_server(['dist.world_size=2'])\n"
        "pid = forkserver._forkserver._forkserver_pid\n"
        "import time\nwhile b'forkserver' not in open(f'/proc/{pid}/cmdline', 'rb').read():\n"
        "    time.sleep(0.01)  # until it has exec'd: its own environment, not ours forked\n"
        "print(open(f'/proc/{pid}/environ', 'rb').read().split(b'\\0').count("
        "b'OMP_WAIT_POLICY=PASSIVE'))\nstop_fork_server()\n")


def test_the_fork_server_loads_torch_with_the_passive_wait_policy():
    """Ranks fork from the server, whose libgomp read its environment when it loaded torch."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run([sys.executable, "-c", WARM], cwd=ROOT, capture_output=True, text=True,
                         env={**env, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert out.stdout.strip() == "1", out.stdout + out.stderr


@pytest.mark.parametrize("cores, ranks, want", [(4, 1, 4), (4, 2, 2), (4, 3, 1), (4, 8, 1),
                                                (1, 1, 1)])
def test_default_threads_share_the_allowed_cores(monkeypatch, cores, ranks, want):
    monkeypatch.setattr(threads, "allowed_cores", lambda: cores)
    assert threads.default_threads(ranks, busy=0) == want


def _threads(topo):
    import torch

    return torch.get_num_threads()


def test_a_one_rank_run_takes_the_threads_the_free_cores_give(monkeypatch):
    """``dist.threads_per_rank=0``: the allowed cores (the affinity mask, not the host's);
    a value set is kept."""
    import torch

    from gnnscale.distributed import local

    before = torch.get_num_threads()
    monkeypatch.setattr(local, "default_threads", lambda ranks, busy=None: 1)
    assert local.Launcher(world_size=1, threads_per_rank=0).launch(_threads) == [1]
    cores = os.cpu_count() or 1
    assert local.Launcher(world_size=1, threads_per_rank=cores).launch(_threads) == [cores]
    assert torch.get_num_threads() == before


def test_busy_cores_sees_a_spinning_process():
    """A process spinning on one of this process's cores counts as one busy core."""
    cpus = sorted(os.sched_getaffinity(0))
    spin = subprocess.Popen([sys.executable, "-c", "import os, sys\n"
                             f"os.sched_setaffinity(0, {{{cpus[-1]}}})\n"
                             "print('up', flush=True)\nwhile True: pass"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert spin.stdout.readline().strip() == "up"
        assert threads.busy_cores(0.2) >= 1
    finally:
        spin.kill()
        spin.wait()


@pytest.mark.parametrize("cores, busy, ranks, want", [(4, 1, 1, 3), (2, 1, 1, 1), (2, 2, 1, 1),
                                                      (4, 2, 2, 1), (8, 0, 2, 4)])
def test_default_threads_leave_the_busy_cores(monkeypatch, cores, busy, ranks, want):
    monkeypatch.setattr(threads, "allowed_cores", lambda: cores)
    assert threads.default_threads(ranks, busy) == want


@pytest.mark.skipif(threads.allowed_cores() < 2, reason="needs 2 cores to choose between counts")
def test_a_resumed_run_takes_the_thread_count_its_checkpoint_chose(tmp_path, monkeypatch):
    """``dist.threads_per_rank=0`` under load chose fewer threads; the resume, on an idle host,
    trains with that count again (so its float sums split as before)."""
    from gnnscale.distributed import local
    from gnnscale.runner import checkpoint
    from gnnscale.runner.run import run
    from tests._train import TINY, make_cfg

    cores = threads.allowed_cores()
    monkeypatch.setattr(local, "host_load", lambda: (cores - 1, [0]))  # one core left free
    run(make_cfg(tmp_path, *TINY, "epochs=1", "dist.world_size=1"))
    assert checkpoint.load(tmp_path / "run" / "checkpoint.pt")["threads"] == 1
    monkeypatch.setattr(local, "host_load", lambda: (0, list(range(cores))))  # idle now
    run(make_cfg(tmp_path, *TINY, "epochs=2", "dist.world_size=1", "resume=true"))
    assert checkpoint.load(tmp_path / "run" / "checkpoint.pt")["threads"] == 1
