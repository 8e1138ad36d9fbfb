"""Hardening, round four (issue 50), the run folder's side: a config read from a file never
chooses what is imported (item 1), nothing of the user's is deleted or overwritten (item 3's
``out=`` folder and run lock), a fork server killed as ranks start is one line (item 5).

Item 1 plants ``{"_target_": "subprocess.getoutput", "cmd": "id > FILE"}`` as each group of
a finished run's config (task, dataset, model, strategy, optim, logger), in the checkpoint and
in ``results.json``, and reads the folder with every reader (``python -m gnnscale.predict``,
``python -m gnnscale.embed``, ``gnnscale.load_run``): FILE never appears, and the refusal is
one line (status 2 and no traceback from the command lines, a ``UserError`` from Python).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import gnnscale
from gnnscale.errors import UserError
from gnnscale.runner import checkpoint
from tests._train import TINY

ROOT = Path(__file__).resolve().parents[2]
ONE = [*TINY, "epochs=1", "dist.world_size=1", "progress=false"]
GROUPS = ("task", "dataset", "model", "strategy", "optim", "logger")


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished 1-epoch run (its folder: checkpoint.pt, results.json)."""
    tmp = tmp_path_factory.mktemp("round4")
    run = gnnscale.train(ONE, run_dir=tmp / "run", data_root=tmp / "data")
    return Path(run.run_dir)


def planted_copy(finished: Path, dest: Path, group: str, where: str, proof: Path,
                 node: dict | None = None) -> Path:
    """A copy of the run whose ``where`` file (``checkpoint`` or ``results``) names a command
    as ``group`` (it would write ``proof``)."""
    run = dest / f"run-{group}-{where}"
    shutil.copytree(finished, run)
    node = node or {"_target_": "subprocess.getoutput", "cmd": f"id > {proof}"}
    if where == "checkpoint":
        path = run / checkpoint.FILENAME
        state = torch.load(path, weights_only=True)
        state["config"][group] = node
        torch.save(state, path)
        checkpoint.load_run(path)  # it passes every checkpoint check
    else:
        path = run / "results.json"
        results = json.loads(path.read_text())
        results["config"][group] = node
        path.write_text(json.dumps(results))
    return run


def one_line_refusal(text: str, group: str) -> None:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    assert len(lines) == 1, text
    assert "Traceback" not in text and f"{group}._target_" in lines[0], text
    assert "not an option gnnscale declares" in lines[0], text


@pytest.mark.parametrize("where", ["checkpoint", "results"])
@pytest.mark.parametrize("group", GROUPS)
def test_a_planted_target_runs_nothing_in_any_reader(finished, tmp_path, capsys, group, where):
    """Every reader of a run folder refuses a planted ``_target_`` in one line, nothing run."""
    from gnnscale.embed.__main__ import main as embed_main
    from gnnscale.predict.__main__ import main as predict_main

    proof = tmp_path / "PROOF"
    run = planted_copy(finished, tmp_path, group, where, proof)
    data = f"data_root={finished.parent / 'data'}"
    for main, extra in ((predict_main, [f"out={tmp_path / 'p'}", "format=npy"]),
                        (embed_main, [f"out={tmp_path / 'e.npy'}"])):
        with pytest.raises(SystemExit) as exit_:
            main([f"run_dir={run}", data, "progress=false", *extra])
        assert exit_.value.code == 2
        one_line_refusal(capsys.readouterr().err.removeprefix("error: "), group)
        assert not proof.exists()
    with pytest.raises(UserError) as err:
        gnnscale.load_run(run).model  # noqa: B018 - the property loads the model
    assert not proof.exists()
    one_line_refusal(str(err.value), group)
    assert type(err.value).__name__ == "RunFolderError"
    assert not (tmp_path / "p").exists() and not (tmp_path / "e.npy").exists()


def test_the_command_lines_refuse_in_one_line_without_a_traceback(finished, tmp_path):
    """As a user runs them: a new process each, status 2, one line on stderr, nothing run."""
    proof = tmp_path / "PROOF"
    run = planted_copy(finished, tmp_path, "task", "checkpoint", proof)
    for module in ("gnnscale.predict", "gnnscale.embed"):
        res = subprocess.run([sys.executable, "-m", module, f"run_dir={run}", "progress=false"],
                             cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert res.returncode == 2, res.stderr
        one_line_refusal(res.stderr.removeprefix("error: "), "task")
        assert not proof.exists()


def test_a_custom_model_is_never_imported_from_the_run_folder(finished, tmp_path):
    """``model=custom``'s ``model.target`` read from a file names a module the run folder
    brings (here in the working directory, which ``python -m`` puts on the path): refused,
    not imported."""
    proof = tmp_path / "PROOF"
    node = {"_target_": "gnnscale.models.custom.Custom", "target": "plantedmod.Net",
            "kwargs": {}, "num_layers": 2, "dropout": 0.0, "input_dropout": 0.0}
    run = planted_copy(finished, tmp_path, "model", "checkpoint", proof, node)
    (run / "plantedmod.py").write_text(f"open({str(proof)!r}, 'w').write('imported')\n"
                                       "import torch\nNet = torch.nn.Linear\n")
    res = subprocess.run([sys.executable, "-m", "gnnscale.predict", f"run_dir={run}",
                          f"data_root={finished.parent / 'data'}", "progress=false"],
                         cwd=run, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 2, res.stderr
    assert not proof.exists()
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "inside the run folder" in lines[0], res.stderr


def test_a_custom_model_off_the_path_is_named(finished, tmp_path):
    from gnnscale.runner.finished import RunFolderError, checked_config

    node = {"_target_": "gnnscale.models.custom.Custom", "target": "nosuchpkg_r4.models.Net"}
    with pytest.raises(RunFolderError, match="is not on this Python path"):
        checked_config({"model": node}, "x.pt", tmp_path)


def test_an_interpolated_target_is_refused(tmp_path):
    """A target made by an interpolation (from another key of the file) is refused too."""
    from gnnscale.runner.finished import RunFolderError, checked_config

    raw = {"evil": "subprocess.getoutput", "task": {"_target_": "${evil}", "cmd": "id"}}
    with pytest.raises(RunFolderError, match="task._target_"):
        checked_config(raw, "x.pt", tmp_path)


def test_a_node_off_its_schema_is_refused(finished):
    """A declared target with a key its schema lacks (or a mistyped value) is refused."""
    from gnnscale.runner.finished import RunFolderError, checked_config

    state = checkpoint.load_run(finished / checkpoint.FILENAME)
    cfg = dict(state["config"])
    checked_config(cfg, "ok.pt", finished)  # the run's own config passes
    cfg["optim"] = {**cfg["optim"], "lr": "fast"}
    with pytest.raises(RunFolderError, match="optim does not fit the schema"):
        checked_config(cfg, "x.pt", finished)


# -- item 3: nothing of the user's is deleted or overwritten ---------------------------------
def test_predict_never_deletes_a_users_folder_named_like_a_table(finished, tmp_path, capsys):
    """``format=npy out=DIR`` with the user's own ``DIR/nodes``: refused in one line, their
    files kept; a table folder gnnscale wrote is replaced as before."""
    from gnnscale.predict.__main__ import main

    out = tmp_path / "out"
    (out / "nodes").mkdir(parents=True)
    (out / "nodes" / "mine.csv").write_text("keep me\n")
    data = f"data_root={finished.parent / 'data'}"
    with pytest.raises(SystemExit) as exit_:
        main([f"run_dir={finished}", f"out={out}", "format=npy", data, "progress=false"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is not a table gnnscale wrote" in err, err
    assert (out / "nodes" / "mine.csv").read_text() == "keep me\n"
    other = tmp_path / "other"
    for _ in range(2):  # its own table is replaced
        main([f"run_dir={finished}", f"out={other}", "format=npy", data, "progress=false"])
    assert (other / "nodes" / "pred.npy").is_file()


HOLD = ("import sys, time; from gnnscale.runner.runlock import run_folder_lock\n"
        "with run_folder_lock(sys.argv[1]):\n    print('held', flush=True); time.sleep(600)\n")


def test_a_run_refused_by_the_lock_leaves_the_live_runs_record(tmp_path):
    """train.py into a folder another run holds: refused, and the live run's
    ``.hydra/config.yaml`` and ``overrides.yaml`` are as they were."""
    run = tmp_path / "run"
    record = run / ".hydra"
    record.mkdir(parents=True)
    (record / "config.yaml").write_text("live: config\n")
    (record / "overrides.yaml").write_text("- live=overrides\n")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        res = subprocess.run([sys.executable, "train.py", *TINY, "epochs=1",
                              "dist.world_size=1", "progress=false", f"hydra.run.dir={run}",
                              f"data_root={tmp_path / 'data'}"], cwd=ROOT,
                             capture_output=True, text=True, timeout=300,
                             env={**os.environ, "GNNSCALE_START_METHOD": "spawn"})
    finally:
        holder.kill()
        holder.wait()
    assert res.returncode == 2, res.stderr
    assert "is in use by process" in res.stderr, res.stderr
    assert (record / "config.yaml").read_text() == "live: config\n"
    assert (record / "overrides.yaml").read_text() == "- live=overrides\n"
    assert not (record / "hydra.yaml").exists()


def test_train_py_still_writes_its_record(tmp_path):
    """A run that holds its folder writes Hydra's record, as Hydra would."""
    run = tmp_path / "run"
    res = subprocess.run([sys.executable, "train.py", *TINY, "epochs=1", "dist.world_size=1",
                          "progress=false", "checkpoint=false", f"hydra.run.dir={run}",
                          f"data_root={tmp_path / 'data'}", "seed=3"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "GNNSCALE_START_METHOD": "spawn"})
    assert res.returncode == 0, res.stderr
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(run / ".hydra" / "config.yaml")
    assert cfg.seed == 3 and cfg.dataset.preset == "tiny"
    assert "seed=3" in OmegaConf.load(run / ".hydra" / "overrides.yaml")
    assert OmegaConf.load(run / ".hydra" / "hydra.yaml").hydra.run.dir == str(run)


# -- item 5: a fork server killed while embed starts ranks -----------------------------------
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a fork server")
def test_a_fork_server_killed_as_embed_starts_ranks_is_one_line(finished, tmp_path, capsys,
                                                                 monkeypatch):
    """The server dies after the launcher found it running and connected to it, before it
    forked the rank: one line naming it (status 1), no ``EOFError``; the next launch starts
    a new server."""
    import signal
    from multiprocessing import forkserver, reduction

    from gnnscale.embed.__main__ import main

    if os.environ.get("GNNSCALE_START_METHOD", "forkserver") != "forkserver":
        pytest.skip("GNNSCALE_START_METHOD asks for spawn: no fork server")
    send = reduction.sendfds
    killed = []

    def killed_first(sock, fds):  # the launcher asks the server for a rank: it dies now
        if not killed:
            pid = forkserver._forkserver._forkserver_pid
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                pass  # dead (a zombie, not reaped: the launcher finds out itself)
        return send(sock, fds)

    monkeypatch.setattr(reduction, "sendfds", killed_first)
    out = tmp_path / "e.npy"
    with pytest.raises(SystemExit) as exit_:
        main([f"run_dir={finished}", f"out={out}", "world_size=2", "progress=false",
              f"data_root={finished.parent / 'data'}"])
    assert exit_.value.code == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "the fork server that started the ranks (pid" in err, err
    assert "was killed by signal SIGKILL while the ranks were starting" in err, err
    assert "EOFError" not in err and "Traceback" not in err, err
    assert not out.exists() and not list(tmp_path.glob(".e.*"))
    assert killed
    monkeypatch.setattr(reduction, "sendfds", send)
    main([f"run_dir={finished}", f"out={out}", "world_size=2", "progress=false",
          f"data_root={finished.parent / 'data'}"])
    assert out.is_file()


# -- item 8: round three's D1 and D2, re-tested -------------------------------------------------
#: run ``train.py`` (argv after the first two arguments) and SIGKILL it at the first audit event
#: after it makes a folder whose name starts with the first argument: exactly as early as that
KILL_AFTER_MKDIR = """
import os, runpy, signal, sys
prefix, argv = sys.argv[1], sys.argv[2:]
armed, killing = [], []
def hook(event, args):
    if armed and not killing:  # os.kill raises an audit event of its own
        killing.append(event)
        os.kill(os.getpid(), signal.SIGKILL)
    if event == "os.mkdir" and os.path.basename(str(args[0])).startswith(prefix):
        armed.append(args[0])
sys.addaudithook(hook)
sys.argv = ["train.py", *argv]
runpy.run_path("train.py", run_name="__main__")
"""


def _killed_after_mkdir(prefix: str, argv: list[str], env: dict) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, "-c", KILL_AFTER_MKDIR, prefix, *argv], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == -9, res.stderr  # it was killed there, not before
    return res


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a fork server")
def test_d1_a_launcher_killed_as_it_makes_the_socket_folder_leaves_nothing(tmp_path):
    """Round three's D1: SIGKILL ``train.py`` right after multiprocessing's ``pymp-*`` folder
    is made (before any other step): what the next run does first removes everything."""
    import tempfile

    from gnnscale.distributed.guard import remove_stale_temp_dirs

    # a short temp folder: the sockets fit in multiprocessing's own pymp-* folder there
    tmp = Path(tempfile.mkdtemp(prefix="r4d1-", dir="/tmp"))
    try:
        env = {k: v for k, v in os.environ.items() if k != "GNNSCALE_START_METHOD"}
        _killed_after_mkdir("pymp-", [*TINY, "dist.world_size=2",
                                      f"run_dir={tmp_path / 'run'}",
                                      f"data_root={tmp_path / 'data'}"],
                            {**env, "TMPDIR": str(tmp)})
        assert list(tmp.rglob("pymp-*")), "it was killed after making its socket folder"
        remove_stale_temp_dirs(str(tmp))  # what the next run does first
        assert list(tmp.iterdir()) == []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.slow
def test_d2_a_launcher_killed_while_processing_leaves_no_processed_temp(tmp_path):
    """Round three's D2: SIGKILL ``train.py`` right after it makes its ``.processed.*``
    temp folder; the next run trains and leaves none behind."""
    data = tmp_path / "data"
    argv = [*TINY, "epochs=1", "dist.world_size=1", "progress=false", "checkpoint=false",
            f"data_root={data}"]
    env = {**os.environ, "GNNSCALE_START_METHOD": "spawn"}
    _killed_after_mkdir(".processed.tmp", [*argv, f"run_dir={tmp_path / 'killed'}"], env)
    assert list(data.rglob(".processed.tmp*")), "it was killed while processing"
    res = subprocess.run([sys.executable, "train.py", *argv, f"run_dir={tmp_path / 'next'}"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert [p for p in data.rglob(".*") if p.name.startswith(".processed.")] == []


# -- item 1: a part layout's info ---------------------------------------------------------------
@pytest.mark.parametrize("key", ["partitioner_config", "dataset"])
def test_a_layout_naming_an_undeclared_target_is_refused(tmp_path, key):
    """A layout.json whose partitioner's or dataset's ``_target_`` names a command (its
    checksum made to match) is refused in one line by every reader of the layout."""
    from gnnscale.partition.book import PartitionBook
    from gnnscale.partition.layout import LayoutError, info_checksum, read_layout
    from gnnscale.partition.parts import write_layout
    from gnnscale.partition.store import graph_checksum
    from gnnscale.runner.validate import validate
    from tests._train import make_cfg
    from tests.partition.test_parts import RUN, nodes, small_graph

    cfg = make_cfg(tmp_path, *RUN, f"parts={tmp_path / 'L'}")
    graph = small_graph()
    book = PartitionBook.from_edge_cut(graph, torch.arange(graph.num_nodes) % 2, 2)
    book.meta["checksum"] = graph_checksum(graph)
    write_layout(graph, book, tmp_path / "L", nodes(cfg, "dataset"), nodes(cfg, "partitioner"),
                 log=lambda _m: None)
    validate(cfg)  # as written: accepted
    path = tmp_path / "L" / "layout.json"
    info = json.loads(path.read_text())
    info[key] = {**info[key], "_target_": "subprocess.getoutput"}
    info["checksum"] = info_checksum(info)
    path.write_text(json.dumps(info))
    for read in (lambda: read_layout(tmp_path / "L"), lambda: validate(cfg)):
        with pytest.raises(LayoutError) as err:
            read()
        text = str(err.value)
        assert len(text.splitlines()) == 1, text
        assert f"{key}._target_='subprocess.getoutput' is not an option gnnscale declares" \
            in text, text
