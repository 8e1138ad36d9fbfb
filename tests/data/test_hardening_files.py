"""Files, round three (issue 39): a killed phase leaves nothing behind and overwrites nothing
good; every field of every file is checked (checkpoints, meta.json, link splits, edge
weights), each refusal one line naming the file and the field."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from gnnscale.errors import UserError
from gnnscale.runner import checkpoint
from gnnscale.runner.run import run
from gnnscale.runner.validate import validate
from tests._train import TINY, make_cfg

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _wait_for(predicate, proc: subprocess.Popen, deadline_s: float = 120.0):
    end = time.monotonic() + deadline_s
    while True:
        found = predicate()
        if found:
            return found
        assert proc.poll() is None, f"exited {proc.returncode} before the moment to kill it"
        assert time.monotonic() < end, "the moment to kill never came"
        time.sleep(0.002)


@pytest.fixture(scope="module")
def one_epoch(tmp_path_factory) -> Path:
    """A finished 1-epoch, 1-rank run (its run folder and data beside it)."""
    tmp = tmp_path_factory.mktemp("hardening")
    run(make_cfg(tmp, *TINY, "epochs=1", "dist.world_size=1"))
    return tmp


def _resume_cfg(base: Path, tmp_path: Path, edit) -> object:
    """A resume of a copy of ``one_epoch``'s run whose checkpoint ``edit(state)`` changed."""
    run_dir = tmp_path / "run"
    shutil.copytree(base / "run", run_dir)
    path = run_dir / checkpoint.FILENAME
    state = checkpoint.load(path)
    edit(state)
    torch.save(state, path)
    cfg = make_cfg(tmp_path, *TINY, "epochs=2", "dist.world_size=1", "resume=true")
    cfg.data_root = str(base / "data")
    return cfg


# -- 39.5: every field of a checkpoint --------------------------------------------------------
@pytest.mark.parametrize("edit, field", [
    (lambda s: s.update(epoch=-7), "field epoch is -7"),
    (lambda s: s.update(epoch="0"), "field epoch is '0'"),
    (lambda s: s.pop("optimizer"), "field optimizer is missing"),
    (lambda s: s.update(model=[1, 2]), "field model is not a dict"),
    (lambda s: s.update(rng={}), "field rng is not a non-empty list"),
    (lambda s: s["rng"][0].pop("numpy"), "field rng[0] ['numpy'] lacks"),
    (lambda s: s.update(history=s["history"] * 2), "field history holds 2 records"),
    (lambda s: s["history"][0].pop("epoch_time"), "field history [0]['epoch_time'] is None"),
    (lambda s: s.update(config="x"), "field config is a str"),
])
def test_bad_checkpoint_fields_are_refused_before_training(one_epoch, tmp_path, edit, field):
    cfg = _resume_cfg(one_epoch, tmp_path, edit)
    with pytest.raises(UserError) as err:
        validate(cfg)
    msg = str(err.value)
    assert msg.startswith(f"{cfg.run_dir}/checkpoint.pt: ") and field in msg, msg
    assert "\n" not in msg


def test_text_file_as_checkpoint_is_one_line(tmp_path):
    path = tmp_path / checkpoint.FILENAME
    path.write_text("hello world\n")
    with pytest.raises(checkpoint.CheckpointError, match=f"cannot read the checkpoint {path}"):
        checkpoint.load_run(path)


@pytest.mark.slow
def test_bad_checkpoint_is_error_exit_2_from_train_py(one_epoch, tmp_path):
    cfg = _resume_cfg(one_epoch, tmp_path, lambda s: s.update(epoch=-7))
    proc = subprocess.run(
        [PY, "train.py", *TINY, "epochs=2", "dist.world_size=1", "resume=true",
         f"run_dir={cfg.run_dir}", f"data_root={cfg.data_root}", "progress=false"],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "field epoch" in lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr


def test_resume_on_a_rewritten_graph_is_refused(one_epoch, tmp_path):
    """The checkpoint records its graph's checksum: another graph under the same config
    (a custom file rewritten in place) is refused, naming the field."""
    cfg = _resume_cfg(one_epoch, tmp_path, lambda s: None)
    state = checkpoint.load(Path(cfg.run_dir) / checkpoint.FILENAME)
    assert isinstance(state["graph"], str)  # recorded by the run
    validate(cfg)  # the same graph: resumes
    state["graph"] = "0" * 32
    torch.save(state, Path(cfg.run_dir) / checkpoint.FILENAME)
    with pytest.raises(UserError, match="checkpoint.pt field graph: the checkpoint was trained "
                                        "on the graph with checksum 0000"):
        validate(cfg)


# -- 39.4: a killed checkpoint write ----------------------------------------------------------
def test_checkpoint_temp_of_a_dead_writer_is_swept(tmp_path):
    path = tmp_path / checkpoint.FILENAME
    dead = tmp_path / f".checkpoint.pt.tmp{_dead_pid()}"
    alive = tmp_path / f".checkpoint.pt.tmp{os.getppid()}"  # a live writer's: kept
    dead.write_bytes(b"x" * 100)
    alive.write_bytes(b"x")
    checkpoint.save(path, {"w": torch.ones(2)})
    assert not dead.exists() and alive.exists()
    alive.unlink()


SAVE_LOOP = """
import sys, torch
from gnnscale.runner import checkpoint
w = torch.randn(8_000_000)
while True:
    checkpoint.save(sys.argv[1], {"w": w})
"""


@pytest.mark.slow
def test_writer_killed_mid_checkpoint_leaves_the_old_one_and_the_next_save_sweeps(tmp_path):
    path = tmp_path / checkpoint.FILENAME
    checkpoint.save(path, {"w": torch.ones(2)})
    proc = subprocess.Popen([PY, "-c", SAVE_LOOP, str(path)], cwd=ROOT, env=_env())
    def written() -> list[Path]:  # the killed writer's temp file, once it holds bytes
        found = []
        for p in tmp_path.glob(f".checkpoint.pt.tmp{proc.pid}@*"):
            try:
                if p.stat().st_size:
                    found.append(p)
            except OSError:  # renamed into place meanwhile
                pass
        return found

    try:
        _wait_for(lambda: bool(written()), proc)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert written()  # killed mid-write
    good = checkpoint.load(path)["w"]  # the old checkpoint, or a complete new one
    assert good.numel() in (2, 8_000_000)
    checkpoint.save(path, {"w": torch.zeros(3)})  # the next run's save
    assert sorted(p.name for p in tmp_path.iterdir()) == [checkpoint.FILENAME]


# -- 39.4: a killed processing ----------------------------------------------------------------
SAVE_GRAPH_LOOP = """
import sys
from gnnscale.data import processed
from gnnscale.data.synthetic import generate
g = generate("tiny", seed=0)
while True:  # every save builds a temp folder beside the published one
    processed.save(g, sys.argv[1])
"""


@pytest.mark.slow
def test_processing_killed_leaves_a_temp_folder_the_next_save_removes(tmp_path):
    from gnnscale.data import processed

    folder = tmp_path / "g" / "processed"
    proc = subprocess.Popen([PY, "-c", SAVE_GRAPH_LOOP, str(folder)], cwd=ROOT, env=_env())
    prefix = f".processed.tmp{proc.pid}@"
    try:
        _wait_for(lambda: folder.is_dir() and [p for p in folder.parent.iterdir()
                                               if p.name.startswith(prefix)], proc)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    left = [p for p in folder.parent.iterdir() if p.name.startswith(prefix)]
    assert left, "killed while writing: its temp folder is there"
    alive = folder.parent / f".processed.tmp{os.getpid()}@{left[0].name.split('@')[1]}"
    alive.mkdir()  # a live writer's (this process): never removed
    from gnnscale.data.synthetic import generate

    processed.save(generate("tiny", seed=0), folder)  # the next run's save
    assert sorted(p.name for p in folder.parent.iterdir()) == sorted(["processed", alive.name])
    processed.load(folder, verify=True)  # the published copy is whole
    alive.rmdir()


def test_stamp_temp_of_a_dead_process_is_swept(tiny_graph, tmp_path):
    from gnnscale.data import processed

    folder = tmp_path / "processed"
    processed.save(tiny_graph, folder)
    stale = folder / f"{processed.STAMP}.{_dead_pid()}.tmp"
    stale.write_text("{}")
    processed.load(folder, verify=True)
    assert not stale.exists()


# -- 39.5: meta.json's fields -------------------------------------------------------------------
@pytest.mark.parametrize("field, value, match", [
    ("num_nodes", 1500, "field num_nodes is 1500 but the arrays' shapes give 2000"),
    ("num_edges", 10, "field num_edges is 10 but the arrays' shapes give"),
    ("num_features", -1, "field num_features is -1, not an integer >= 0"),
    ("name", "other", "meta.json: checksum mismatch"),
])
def test_edited_meta_json_is_refused_and_never_trusted(tiny_graph, tmp_path, field, value,
                                                       match):
    import json

    from gnnscale.data import processed
    from gnnscale.data.metadata import DatasetMeta

    folder = tmp_path / "processed"
    processed.save(tiny_graph, folder)
    assert DatasetMeta.read(folder).num_nodes == tiny_graph.num_nodes
    meta = json.loads((folder / "meta.json").read_text())
    meta[field] = value
    (folder / "meta.json").write_text(json.dumps(meta))
    assert DatasetMeta.read(folder) is None  # the launcher does not trust the edited sizes
    with pytest.raises(processed.ProcessedDataError, match=match) as err:
        processed.load(folder)
    assert str(folder / "meta.json") in str(err.value)


def test_edited_meta_json_is_error_exit_2_before_ranks(tmp_path):
    import json

    cfg = make_cfg(tmp_path, *TINY, "epochs=1", "dist.world_size=2")
    from gnnscale import registry

    folder = registry.build(cfg.dataset).processed_dir
    registry.build(cfg.dataset).load()
    meta = json.loads((folder / "meta.json").read_text())
    meta["num_nodes"] = 1
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(UserError, match="field num_nodes is 1 but the arrays' shapes give 2000"):
        validate(cfg)


# -- small: a full disk while processing ------------------------------------------------------
def test_full_disk_while_processing_names_the_path_and_free_space(tiny_graph, tmp_path):
    from gnnscale.data import processed

    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (not root?)")
    try:
        with pytest.raises(processed.DiskFullError) as err:
            processed.save(tiny_graph, mnt / "g" / "processed")
        msg = str(err.value)
        assert f"cannot write the processed graph to {mnt}/g/processed: no space left" in msg
        assert "MiB free there" in msg and "\n" not in msg
        assert isinstance(err.value, UserError)
        assert [p.name for p in (mnt / "g").iterdir()] == []  # its temp folder removed
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


# -- 39.5: edge weights; small: what a custom graph lacks ---------------------------------------
def _ring_npz(tmp_path: Path, **extra) -> Path:
    import numpy as np

    n = 6
    arrays = {"edge_index": np.stack([np.arange(n), (np.arange(n) + 1) % n]),
              "x": np.ones((n, 2), np.float32), "y": np.arange(n) % 2,
              "train_idx": np.array([0, 1]), "val_idx": np.array([2, 3]),
              "test_idx": np.array([4, 5]), **extra}
    path = tmp_path / "g.npz"
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})
    return path


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), -1.0])
def test_non_finite_or_negative_edge_weights_are_refused_at_processing(tmp_path, bad):
    import numpy as np

    from gnnscale.data.custom import CustomDataset
    from gnnscale.errors import ConfigError

    w = np.ones(6, np.float32)
    w[3] = bad
    path = _ring_npz(tmp_path, edge_weight=w)
    ds = CustomDataset(tmp_path / "data", path=str(path), symmetrize=False)
    with pytest.raises(ConfigError, match=f"{path}: edge_weight holds 1 values that are NaN, "
                                          r"infinite or negative \(first: edge"):
        ds.load()
    assert not ds.processed_dir.exists()  # refused before it is saved


@pytest.mark.parametrize("drop, missing", [
    ("y", "lacks labels (y): node classification needs"),
    ("x", "lacks features (x): node classification needs"),
])
def test_custom_graph_without_y_or_x_says_which(tmp_path, drop, missing):
    path = _ring_npz(tmp_path, **{drop: None})
    cfg = make_cfg(tmp_path, "dataset=custom", f"dataset.path={path}", "dataset.symmetrize=false",
                   "model.hidden=8", "model.num_layers=1", "sampler.fanouts=[2]",
                   "strategy.batch_size=2", "logger=none", "epochs=1")
    with pytest.raises(UserError, match=rf"dataset g {re.escape(missing)}"):
        validate(cfg)


# -- 39.4: a killed embedding -------------------------------------------------------------------
@pytest.mark.slow
def test_embed_killed_midway_keeps_the_previous_output_and_the_next_run_sweeps(one_epoch,
                                                                              tmp_path):
    import numpy as np

    from gnnscale.runner.embed import embed

    out = tmp_path / "emb.npy"
    embed(str(one_epoch / "run"), out=str(out), layer=-1, progress=False)  # a layer file too
    good = np.load(out)
    assert np.abs(good).sum() > 0
    proc = subprocess.Popen([PY, "-m", "gnnscale.embed", f"run_dir={one_epoch / 'run'}",
                             f"out={out}", "progress=false"], cwd=ROOT, env=_env())
    prefix = f".emb.npy.tmp{proc.pid}@"
    try:
        _wait_for(lambda: [p for p in tmp_path.iterdir() if p.name.startswith(prefix)
                           and p.name.endswith("out.npy")], proc)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(prefix)]  # left by the kill
    np.testing.assert_array_equal(np.load(out), good)  # the good output untouched
    embed(str(one_epoch / "run"), out=str(out), layer=-1, progress=False)  # the next run
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emb.ids.npy", "emb.npy"]
    np.testing.assert_array_equal(np.load(out), good)


# -- 39.5: given link splits ---------------------------------------------------------------------
def _given(**links):
    from gnnscale.data.graph import GraphStore

    ring = torch.stack([torch.arange(12), (torch.arange(12) + 1) % 12])
    g = GraphStore.from_edge_index(ring, 12, symmetrize=True, x=torch.ones(12, 2),
                                   meta={"source": "/data/g.npz"})
    g.links = {"train_pos": torch.tensor([[0, 1, 2], [1, 2, 3]]),
               "val_pos": torch.tensor([[4], [5]]), "test_pos": torch.tensor([[6], [7]]),
               **links}
    return g


@pytest.mark.parametrize("links, match", [
    ({"test_pos": torch.tensor([[5], [4]])},
     r"test_pos holds 1 edges that are also validation edges \(val_pos\), first \(5, 4\)"),
    ({"val_neg": torch.tensor([[4], [5]])},
     r"/data/g.npz: val_neg holds 1 of its 1 negatives that are positives of val_pos"),
    ({"test_neg": torch.tensor([[0, 8], [1, 9]])},
     r"/data/g.npz: test_neg holds 2 of its 2 negatives that are positives \(train_pos, "
     r"val_pos, test_pos\) or edges of the graph, first \(0, 1\)"),
])
def test_given_split_with_overlapping_positives_or_edge_negatives_is_refused(links, match):
    from gnnscale.errors import ConfigError
    from gnnscale.tasks.link.edge_split import SplitOptions, split_graph

    with pytest.raises(ConfigError, match=match):
        split_graph(_given(**links), SplitOptions(split="given"))


def test_given_negatives_that_are_non_edges_are_scored_as_given():
    from gnnscale.tasks.link.edge_split import SplitOptions, split_graph

    m = split_graph(_given(test_neg=torch.tensor([[0, 2], [6, 8]])), SplitOptions(split="given"))
    assert torch.equal(m.links["test_neg"], torch.tensor([[0, 2], [6, 8]]))


# -- 39.4: a launcher killed before any rank starts ---------------------------------------------
@pytest.mark.slow
def test_launcher_killed_while_processing_leaves_nothing_in_the_temp_folder(tmp_path):
    """The fork server is warmed first thing, its socket in multiprocessing's pymp-* folder;
    the launcher's private folder, made right after, records that folder as its own, so a
    launcher killed while validating (processing its dataset) has both removed by the next
    run: no pymp-* is left for good."""
    from gnnscale.distributed.guard import remove_stale_temp_dirs

    tmp = tmp_path / "t"
    tmp.mkdir()
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [PY, "train.py", *TINY, "dist.world_size=2", f"run_dir={tmp_path / 'run'}",
         f"data_root={data}", "progress=false"],
        cwd=ROOT, env={**_env(), "TMPDIR": str(tmp)}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: data.is_dir() and list(tmp.glob("pymp-*")), proc)  # validating
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert list(tmp.glob("pymp-*")) and list(tmp.glob(f"gnnscale-run-{proc.pid}-*"))
    time.sleep(0.5)  # the fork server ends when its launcher's pipe closes
    remove_stale_temp_dirs(str(tmp))  # what the next run does first
    assert list(tmp.iterdir()) == []


def test_sweep_keeps_live_writers_and_other_hosts_temp_folders(tmp_path):
    """Only a dead process of this host is known to be gone: a folder named after a live pid,
    or after any pid of another host sharing the file system, is a writer at work."""
    from gnnscale.data.publish import sweep_temp, temp_folder

    path = tmp_path / "processed"
    mine = temp_folder(path)  # this process's, alive
    host = mine.name.split("@")[1].split(".")[0]
    dead = tmp_path / f".processed.tmp{_dead_pid()}@{host}.abc"
    other = tmp_path / f".processed.tmp{_dead_pid()}@another-host.abc"
    unrelated = tmp_path / f".other.tmp{_dead_pid()}@{host}.abc"
    for d in (dead, other, unrelated):
        d.mkdir()
    assert sweep_temp(path) == [dead]
    assert mine.is_dir() and other.is_dir() and unrelated.is_dir()
