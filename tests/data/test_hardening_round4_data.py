"""Hardening, round four (issue 50), the data side: a user's ids and labels kept exactly
(NULs, CSV null words, fractional labels, uint64 ids, a pair of ids sharing the 64-bit hash),
a table rewritten with its size and time kept read again, read-only data trained from, and
hostile inputs (a YAML alias bomb, a forged node count, an unknown type, a very wide CSV
header, swapped part folders, an empty node table) refused in one line each."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gnnscale.data import processed
from gnnscale.data.idmap import IdMap
from gnnscale.data.tables import TableError, TablesDataset, text_hash
from gnnscale.errors import ConfigError, UserError
from tests._train import make_cfg
from tests.test_config_errors import one_message

ROOT = Path(__file__).resolve().parents[2]


def _csv(path: Path, header: str, *rows: str) -> str:
    path.write_text("\n".join([header, *rows]) + "\n")
    return str(path)


def _tables(tmp_path: Path, nodes: list, edges: list, **kw) -> TablesDataset:
    return TablesDataset(str(tmp_path / "data"), nodes=nodes, edges=edges, batch_rows=4, **kw)


def thue_morse_pair(n: int = 1024) -> tuple[str, str]:
    """Two ``n``-character strings, the Thue-Morse word over ``a``/``b`` and its complement:
    for n = 1024 they share the 64-bit polynomial hash of :func:`text_hash` (the difference
    of their sums is a product of ten factors ``1 - P^(2^j)``, divisible by 2^64)."""
    word = [bin(i).count("1") & 1 for i in range(n)]
    return "".join("ab"[t] for t in word), "".join("ba"[t] for t in word)


def test_the_thue_morse_pair_shares_the_hash():
    one, two = thue_morse_pair()
    hashes = text_hash(pa.array([one, two], pa.large_string()))
    assert one != two and hashes[0] == hashes[1]


# -- item 2: ids and labels kept exactly ------------------------------------------------------
def test_ids_and_classes_ending_in_nul_are_kept_exactly(tmp_path):
    """``n5`` and ``n5\\0`` are two ids (they were two ``n5``s in the id map, then refused);
    an edge naming ``n5\\0`` attaches to it, not to ``n5``; a class ``a\\0`` is its own class
    (it left its nodes unlabelled, then was refused). The stored map gives them back byte for
    byte."""
    nodes = _csv(tmp_path / "n.csv", "id,y", "n1,a", "n5,b", "n5\0,a\0", "x\0y\0\0,b")
    edges = _csv(tmp_path / "e.csv", "src,dst", "n1,n5\0", "n5\0,x\0y\0\0")
    ds = _tables(tmp_path, [{"path": nodes, "label": "y"}], [{"path": edges}],
                 symmetrize=False)
    g = ds.load()
    assert g.num_nodes == 4 and sorted(g.edge_index().t().tolist()) == [[0, 2], [2, 3]]
    ids = IdMap.load(ds.processed_dir)
    assert ids.ids["node"].tolist() == ["n1", "n5", "n5\0", "x\0y\0\0"]
    assert ids.to_user("node", [2, 1, 3]).tolist() == ["n5\0", "n5", "x\0y\0\0"]
    assert ids.to_internal("node", ["n5\0", "n5", "x\0y\0\0"]).tolist() == [2, 1, 3]
    with pytest.raises(KeyError) as err:
        ids.to_internal("node", ["x\0y"])
    assert err.value.args[0] == "node type 'node' has no node with id 'x\\x00y'"
    assert ids.class_names("node").tolist() == ["a", "a\0", "b"]
    assert g.y.tolist() == [0, 2, 1, 2]  # every node labelled, a\0 its own class
    meta = (ds.processed_dir / "meta.json").read_text()
    assert "idtext__node" in meta and "classtext__node" in meta


def test_an_older_unicode_id_map_still_reads(tmp_path):
    """A processed folder an older gnnscale wrote keeps string ids and class names as numpy
    unicode (``ids__<type>``, ``classes__<type>``): read as they are."""
    import torch

    from gnnscale.data.graph import GraphStore

    g = GraphStore(indptr=torch.zeros(4, dtype=torch.long),
                   indices=torch.zeros(0, dtype=torch.long), num_classes=2, name="old")
    folder = tmp_path / "processed"
    processed.save(g, folder, side={"ids__node": np.array(["p", "x\0y", "q"]),
                                    "classes__node": np.array(["a", "b"])})
    ids = IdMap.load(folder)
    assert ids.ids["node"].tolist() == ["p", "x\0y", "q"]
    assert ids.to_internal("node", ["q", "x\0y"]).tolist() == [2, 1]
    assert ids.class_names("node").tolist() == ["a", "b"]


def test_after_a_hash_collision_an_edge_id_is_matched_exactly(tmp_path):
    """With two ids sharing the hash the index falls back to the strings: ``n5\\0`` in an
    edge table is not ``n5`` there either (it was, numpy unicode dropping the NUL), and
    interior NULs stay."""
    one, two = thue_morse_pair()
    nodes = _csv(tmp_path / "n.csv", "id", one, two, "n5", "x\0y")
    edges = _csv(tmp_path / "e.csv", "src,dst", f"{one},n5", f"{two},x\0y", "x\0y,n5\0")
    ds = _tables(tmp_path, [{"path": nodes}], [{"path": edges}])
    with pytest.raises(TableError) as err:
        ds.read()
    assert str(err.value).startswith(f"{edges}:row 3 column dst: unknown id 'n5\\x00'")
    edges = _csv(tmp_path / "e.csv", "src,dst", f"{one},n5", f"{two},x\0y", "x\0y,n5")
    parts, found = _tables(tmp_path, [{"path": nodes}], [{"path": edges}]).read()
    assert not parts["node"].index.hashed  # the pair collided: the strings are indexed
    (ei, _, _), = found.values()
    assert ei.T.tolist() == [[0, 2], [1, 3], [3, 2]]
    assert parts["node"].ids.tolist() == [one, two, "n5", "x\0y"]


def test_csv_null_words_are_data_unless_the_schema_names_them(tmp_path):
    """pyarrow's default null words (NA, N/A, null, nan, ...) applied to CSV text: a class
    ``NA`` (Namibia) was unlabelled and an id ``NA`` refused as missing. Now only the empty
    field is empty, unless the table's ``nulls`` names more."""
    rows = [f"{c}{i},{c}" for i in range(15) for c in ("NA", "DE", "FR", "null")]
    rows[0] = "NA,NA"  # an id that is a null word too
    nodes = _csv(tmp_path / "n.csv", "id,country", *rows)
    edges = _csv(tmp_path / "e.csv", "src,dst", "NA,DE0", "nan1,NA")
    with pytest.raises(TableError, match=r"e.csv:row 2 column src: unknown id 'nan1'"):
        _tables(tmp_path, [{"path": nodes, "label": "country"}], [{"path": edges}]).load()
    edges = _csv(tmp_path / "e.csv", "src,dst", "NA,DE0", "null1,NA")
    g = _tables(tmp_path, [{"path": nodes, "label": "country"}], [{"path": edges}]).load()
    ids = IdMap.load(g.meta["processed_dir"])
    assert ids.class_names("node").tolist() == ["DE", "FR", "NA", "null"]
    assert (g.y >= 0).all() and int((g.y == 2).sum()) == 15  # every NA labelled
    assert ids.to_internal("node", ["NA"]).tolist() == [0]
    renamed = _csv(tmp_path / "n2.csv", "id,country",
                   *(f"v{i},{r.split(',')[1]}" for i, r in enumerate(rows)))
    named = _tables(tmp_path, [{"path": renamed, "label": "country", "nulls": ["NA", "null"]}],
                    [{"path": _csv(tmp_path / "e2.csv", "src,dst", "v0,v1")}]).load()
    assert int((named.y < 0).sum()) == 30  # NA and null named as empty: unlabelled
    with pytest.raises(ConfigError, match=r"nodes\[0\].nulls must be a list of words"):
        _tables(tmp_path, [{"path": nodes, "nulls": "NA"}], [{"path": edges}])


def test_a_fractional_label_in_csv_is_refused(tmp_path):
    """A CSV label column of numbers holding 1.5 became class names; the docs promise a
    refusal (as Parquet's float labels have)."""
    nodes = _csv(tmp_path / "n.csv", "id,y", "a,0", "b,1", "c,1.5", "d,")
    edges = _csv(tmp_path / "e.csv", "src,dst", "a,b")
    with pytest.raises(TableError) as err:
        _tables(tmp_path, [{"path": nodes, "label": "y"}], [{"path": edges}]).load()
    assert str(err.value) == f"{nodes}:row 3 column y: label '1.5' is not a class: labels are " \
        "integers or class names"
    nodes = _csv(tmp_path / "n.csv", "id,y", "a,0", "b,x1.5", "c,1.5")  # a name: names
    g = _tables(tmp_path, [{"path": nodes, "label": "y"}], [{"path": edges}]).load()
    assert g.y.tolist() == [0, 2, 1]


def test_parquet_uint64_ids_beyond_int64_are_one_line(tmp_path):
    """uint64 ids >= 2^63 gave a raw ArrowInvalid."""
    big = np.array([1, 2**63 + 5, 3], np.uint64)
    pq.write_table(pa.table({"id": pa.array(big)}), tmp_path / "n.parquet")
    pq.write_table(pa.table({"src": pa.array(np.array([1], np.uint64)),
                             "dst": pa.array(np.array([3], np.uint64))}), tmp_path / "e.parquet")
    spec = ([{"path": str(tmp_path / "n.parquet")}], [{"path": str(tmp_path / "e.parquet")}])
    with pytest.raises(TableError) as err:
        _tables(tmp_path, *spec).load()
    assert str(err.value) == f"{tmp_path / 'n.parquet'}:row 2 column id: id {2**63 + 5} is " \
        "beyond the signed 64-bit range that integer ids are kept in: store the ids as int64 " \
        "or as strings"
    pq.write_table(pa.table({"id": pa.array(np.array([1, 2, 3], np.uint64))}),
                   tmp_path / "n.parquet")
    pq.write_table(pa.table({"src": pa.array(np.array([1, 2**64 - 1], np.uint64)),
                             "dst": pa.array(np.array([3, 2], np.uint64))}),
                   tmp_path / "e.parquet")
    with pytest.raises(TableError, match=rf"e.parquet:row 2 column src: unknown id "
                                         rf"{2**64 - 1}: the 'node' node table"):
        _tables(tmp_path, *spec).load()


def test_ids_round_trip_byte_for_byte_from_tables_to_predictions(tmp_path):
    """The user's ids -- a null word, numeric-looking strings, an interior NUL, the pair
    that shares the hash -- and class names (``NA`` among them) come back exactly in the
    predictions and the embeddings' ids."""
    import gnnscale

    one, two = thue_morse_pair()
    special = ["NA", "007", "1e3", "12", "-0", "x\0y", "null", " pad ", one, two, "n5",
               "n5\0", "n5\0\0"]
    n = 60
    users = special + [f"u{i}" for i in range(n - len(special))]
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, n)
    classes = ["NA", "NA\0"]
    rows = [f'"{u}",{y[i] + rng.normal(0, .3):.3f},{classes[y[i]]}' for i, u in enumerate(users)]
    _csv(tmp_path / "v.csv", "id,f,cls", *rows)
    src, dst = rng.integers(0, n, 300), rng.integers(0, n, 300)
    _csv(tmp_path / "e.csv", "s,d", *(f'"{users[a]}","{users[b]}"' for a, b in zip(src, dst)))
    (tmp_path / "t.yaml").write_text("nodes: [{path: v.csv, features: [f], label: cls}]\n"
                                     "edges: [{path: e.csv, src: s, dst: d}]\n")
    run = gnnscale.train(["dataset=tables", f"dataset.schema={tmp_path / 't.yaml'}",
                          "model.hidden=8", "model.num_layers=2", "sampler.fanouts=[4,4]",
                          "strategy.batch_size=32", "epochs=1", "dist.world_size=1",
                          "logger=none", "progress=false"],
                         run_dir=tmp_path / "run", data_root=tmp_path / "data")
    got = run.predict(out=tmp_path / "pred", progress=False)["nodes"]
    assert sorted(str(u) for u in got["id"].tolist()) == sorted(users)
    assert got["pred_name"].tolist() == [classes[p] for p in got["pred"].tolist()]
    files = list((tmp_path / "pred").rglob("*.parquet"))
    assert files, list((tmp_path / "pred").rglob("*"))
    written = pa.concat_tables([pq.read_table(f) for f in files])
    assert sorted(written.column("id").to_pylist()) == sorted(users)
    assert {"prob_NA", "prob_NA\0"} <= set(written.column_names)
    emb = run.embed(out=tmp_path / "z.parquet", format="parquet", progress=False)
    assert pq.read_table(emb["path"]).column("id").to_pylist() == users
    rows, ids = run.embed(progress=False)  # nothing written: the ids exact, NULs kept
    assert ids.dtype == object and ids.tolist() == users
    assert all(type(u) is str for u in ids.tolist())
    np.testing.assert_array_equal(rows, np.stack(
        pq.read_table(emb["path"]).column("embedding").to_numpy(zero_copy_only=False)))
    with pytest.raises(UserError) as err:  # numpy unicode would drop the NULs: one line
        run.embed(out=tmp_path / "z.npy", progress=False)
    assert str(err.value) == "an id of the embeddings (.ids.npy): 'n5\\x00' ends in a NUL " \
        "character, which an .npy's fixed-width unicode drops: write format=parquet, which " \
        "keeps it"
    folder, = (tmp_path / "data").glob("*/processed")
    assert IdMap.load(folder).class_names("node").tolist() == ["NA", "NA\0"]
    assert processed.load(folder).y.tolist() == y.tolist()  # class NA labelled, not empty


# -- item 3: a rewritten table is read again --------------------------------------------------
def test_a_table_rewritten_with_its_size_and_time_kept_is_read_again(tmp_path):
    """``cp -p`` / ``rsync -a`` keep a table's size and modification time: the processed
    copy is keyed on the tables' content, so the rewrite is noticed."""
    nodes = _csv(tmp_path / "n.csv", "id,y", "a,0", "b,1", "c,0")
    edges = _csv(tmp_path / "e.csv", "src,dst", "a,b", "b,c")
    spec = ([{"path": nodes, "label": "y"}], [{"path": edges}])
    first = _tables(tmp_path, *spec)
    assert first.load().y.tolist() == [0, 1, 0]
    key = first.key
    st = os.stat(nodes)
    other = tmp_path / "staged.csv"
    _csv(other, "id,y", "a,1", "b,1", "c,0")  # same size
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(other, nodes)  # as rsync -a does: a new file renamed into place
    assert os.stat(nodes).st_size == st.st_size and os.stat(nodes).st_mtime_ns == st.st_mtime_ns
    again = _tables(tmp_path, *spec)
    assert again.key != key
    assert again.load().y.tolist() == [1, 1, 0]


# -- item 4: read-only data -------------------------------------------------------------------
@contextlib.contextmanager
def read_only(folder: Path, at: Path):
    """``folder`` bind-mounted read-only at ``at`` (root only; the test skips otherwise)."""
    at.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a read-only bind mount needs root and mount(8)")
    done = subprocess.run(["mount", "--bind", str(folder), str(at)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {done.stderr.decode().strip()}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,ro,bind", str(at)], capture_output=True)
        if ro.returncode != 0:
            pytest.skip(f"cannot remount read-only: {ro.stderr.decode().strip()}")
        probe = at / ".probe"
        with pytest.raises(OSError):
            probe.write_text("x")
        yield at
    finally:  # lazily when busy: a memory map of the test's may outlive the block
        if subprocess.run(["umount", str(at)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(at)], capture_output=True)


def test_a_processed_dataset_on_a_read_only_mount_loads(tmp_path, monkeypatch):
    """Its stamp is written where the run may write (the stamp cache); the folder itself
    is never written to."""
    nodes = _csv(tmp_path / "n.csv", "id,y", "a,0", "b,1", "c,0")
    edges = _csv(tmp_path / "e.csv", "src,dst", "a,b", "b,c")
    g = _tables(tmp_path, [{"path": nodes, "label": "y"}], [{"path": edges}]).load()
    folder = Path(g.meta["processed_dir"])
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)  # new inodes: its stamp vouches for nothing
    monkeypatch.setenv("GNNSCALE_STAMP_DIR", str(tmp_path / "stamps"))
    with read_only(copy, tmp_path / "ro") as ro:
        before = sorted(p.name for p in ro.iterdir())
        graph = processed.load(ro)
        assert graph.num_nodes == 3 and graph.y.tolist() == [0, 1, 0]
        assert IdMap.load(ro).to_internal("node", ["c"]).tolist() == [2]
        assert sorted(p.name for p in ro.iterdir()) == before
        assert len(list((tmp_path / "stamps").glob("*.json"))) == 1
        assert not processed.unverified(ro, sorted(p.name for p in ro.iterdir()
                                                    if not p.name.startswith(".")))


def test_a_stamp_that_cannot_be_written_anywhere_is_one_line(tmp_path, monkeypatch, capfd):
    nodes = _csv(tmp_path / "n.csv", "id", "a", "b")
    edges = _csv(tmp_path / "e.csv", "src,dst", "a,b")
    g = _tables(tmp_path, [{"path": nodes}], [{"path": edges}]).load()
    copy = tmp_path / "copy"
    shutil.copytree(g.meta["processed_dir"], copy)
    (tmp_path / "cache").mkdir()
    with read_only(tmp_path / "cache", tmp_path / "rocache") as rocache:
        monkeypatch.setenv("GNNSCALE_STAMP_DIR", str(rocache))
        with read_only(copy, tmp_path / "ro") as ro:
            capfd.readouterr()
            assert processed.load(ro).num_nodes == 2
            assert processed.load(ro).num_nodes == 2
            err = capfd.readouterr().err.strip().splitlines()
            assert len(err) == 1 and err[0].startswith(f"note: {ro} is read-only and so is"), err


@pytest.mark.slow
def test_a_part_layout_on_a_read_only_mount_trains(tmp_path, monkeypatch):
    """Every rank verified its part and failed writing ``.verified.json.<pid>.tmp`` beside
    it; now the stamps go to the stamp cache and the run trains as from a writable copy."""
    from gnnscale.partition.cli import run as partition
    from gnnscale.runner.run import run

    base = ("dataset=synthetic", "dataset.preset=tiny", "partitioner=random",
            "strategy=fullgraph", "deps=depcomm", "model.hidden=16", "model.num_layers=2",
            "epochs=2", "logger=none", "eval_batch_size=512", "dist.world_size=2")
    partition(make_cfg(tmp_path, *base, f"parts={tmp_path / 'L'}"), log=lambda _m: None)
    shutil.copytree(tmp_path / "L", tmp_path / "copy")  # new inodes: stamps vouch for nothing
    monkeypatch.setenv("GNNSCALE_STAMP_DIR", str(tmp_path / "stamps"))
    ref = run(make_cfg(tmp_path, *base, f"parts={tmp_path / 'L'}", run="ref"))
    with read_only(tmp_path / "copy", tmp_path / "ro") as ro:
        got = run(make_cfg(tmp_path, *base, f"parts={ro}", run="from-ro"))
    assert [h["train_loss"] for h in got["history"]] == [h["train_loss"] for h in ref["history"]]
    assert list((tmp_path / "stamps").glob("*.json"))


@pytest.mark.slow
def test_a_run_trains_from_a_data_root_on_a_read_only_mount(tmp_path, monkeypatch):
    """Two ranks load a processed copy (new inodes: its stamp vouches for nothing) from a
    read-only data_root and train as from the writable one."""
    from gnnscale.runner.run import run
    from tests._train import TINY

    monkeypatch.setenv("GNNSCALE_STAMP_DIR", str(tmp_path / "stamps"))
    ref = run(make_cfg(tmp_path, *TINY, "epochs=1", "dist.world_size=2", run="ref"))
    shutil.copytree(tmp_path / "data", tmp_path / "copy")
    with read_only(tmp_path / "copy", tmp_path / "ro") as ro:
        cfg = make_cfg(tmp_path, *TINY, "epochs=1", "dist.world_size=2", run="from-ro")
        cfg.data_root = str(ro)
        got = run(cfg)
    assert [h["train_loss"] for h in got["history"]] == [h["train_loss"] for h in ref["history"]]
    assert list((tmp_path / "stamps").glob("*.json"))


# -- item 5: bounded and named ----------------------------------------------------------------
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n"
    for i in range(9)) + "nodes: []\nedges: []\n"


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """Each hostile input: its train.py overrides and what its one line says."""
    cases = {}
    (tmp_path / "bomb.yaml").write_text(BOMB)
    assert len(BOMB) < 1100
    cases["alias bomb"] = (["dataset=tables", f"dataset.schema={tmp_path / 'bomb.yaml'}"],
                           "its YAML expands to more than 100,000 values")
    ei = np.array([[0, 1], [0, 1]])
    np.savez(tmp_path / "huge.npz", **{"x__paper": np.ones((2, 3), np.float32),
                                       "y__paper": np.array([0, 1]),
                                       "num_nodes__author": np.array(10**12),
                                       "edge_index__author__writes__paper": ei})
    cases["featureless type of 10^12 nodes"] = (
        ["dataset=custom", f"dataset.path={tmp_path / 'huge.npz'}"],
        f"num_nodes__author = {10**12} for 2 edges touching 'author'")
    np.savez(tmp_path / "unknown.npz", **{"x__paper": np.ones((2, 3), np.float32),
                                          "y__paper": np.array([0, 1]),
                                          "node_types": np.array(["paper", "venue"]),
                                          "edge_index__paper__cites__paper": ei})
    cases["node_types naming an unknown type"] = (
        ["dataset=custom", f"dataset.path={tmp_path / 'unknown.npz'}"],
        "node_types names 'venue', which has no num_nodes, x or y")
    wide = tmp_path / "wide"
    wide.mkdir()
    with open(wide / "n.csv", "w") as f:
        f.write("id," + ",".join(f"c{i}" for i in range(10**6)) + "\n")
        f.write("a," + ",".join("0" * 10**6) + "\n")
    _csv(wide / "e.csv", "src,dst", "a,a")
    (wide / "t.yaml").write_text("nodes: [{path: n.csv, features: [c0, c999999]}]\n"
                                 "edges: [{path: e.csv}]\n")
    cases["a CSV with a 10^6-column header"] = (
        ["dataset=tables", f"dataset.schema={wide / 't.yaml'}"],
        f"{(wide / 'n.csv').resolve()}: its header row names 1,000,001 columns, more than "
        "the 100,000 a CSV table may have")
    empty = tmp_path / "empty"
    empty.mkdir()
    _csv(empty / "n.csv", "id,y")
    _csv(empty / "e.csv", "src,dst")
    (empty / "t.yaml").write_text("nodes: [{path: n.csv, label: y}]\nedges: [{path: e.csv}]\n")
    cases["an empty node table"] = (
        ["dataset=tables", f"dataset.schema={empty / 't.yaml'}"],
        f"{(empty / 'n.csv').resolve()}: no data rows: the 'node' node table lists its nodes")
    return cases


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path):
    from gnnscale.data.schemas import TablesConfig

    (tmp_path / "bomb.yaml").write_text(BOMB)
    start = time.monotonic()
    with pytest.raises(ConfigError, match="its YAML expands to more than 100,000 values"):
        TablesConfig(schema=str(tmp_path / "bomb.yaml")).check()
    assert time.monotonic() - start < 60  # minutes before
    (tmp_path / "self.yaml").write_text("nodes: &n [*n]\nedges: []\n")
    with pytest.raises(ConfigError):
        TablesConfig(schema=str(tmp_path / "self.yaml")).check()
    (tmp_path / "big.yaml").write_text("#" * (2 << 20))
    with pytest.raises(ConfigError, match="more than the 1,048,576 a tables schema may have"):
        TablesConfig(schema=str(tmp_path / "big.yaml")).check()


def test_typed_input_bounds_and_names(tmp_path):
    from gnnscale.data.custom import CustomDataset

    cases = _bad_inputs(tmp_path)
    for name in ("featureless type of 10^12 nodes", "node_types naming an unknown type"):
        overrides, says = cases[name]
        path = overrides[1].split("=", 1)[1]
        with pytest.raises(ConfigError) as err:
            CustomDataset(str(tmp_path / "data"), path=path).load()
        assert says in str(err.value) and "\n" not in str(err.value), name


def test_a_very_wide_csv_header_and_an_empty_node_table(tmp_path):
    cases = _bad_inputs(tmp_path)
    wide = tmp_path / "wide"
    start = time.monotonic()
    with pytest.raises(TableError) as err:
        _tables(tmp_path, [{"path": str(wide / "n.csv"), "features": ["c0", "c999999"]}],
                [{"path": str(wide / "e.csv")}]).load()
    assert str(err.value).startswith(cases["a CSV with a 10^6-column header"][1])
    assert time.monotonic() - start < 60  # counted, not parsed (minutes)
    names = [f"{'feature' * 14}_{i:05d}" for i in range(45_000)]
    with open(wide / "n.csv", "w") as f:  # 4.8 MB of header, more than the 4 MiB block
        f.write("id," + ",".join(names) + "\n")
        f.write("a," + ",".join("1" * 45_000) + "\n")
    assert (wide / "n.csv").stat().st_size > 4 << 20  # the block: read only if it grows
    g = _tables(tmp_path, [{"path": str(wide / "n.csv"), "features": [names[0], names[-1]]}],
                [{"path": str(wide / "e.csv")}]).load()
    assert g.num_nodes == 1 and g.x.tolist() == [[1.0, 1.0]]
    empty = tmp_path / "empty"
    with pytest.raises(TableError) as err:
        _tables(tmp_path, [{"path": str(empty / "n.csv"), "label": "y"}],
                [{"path": str(empty / "e.csv")}]).load()
    assert str(err.value).startswith(cases["an empty node table"][1])


def test_swapped_part_folders_are_named_as_a_swap(tmp_path):
    from gnnscale.partition.layout import LayoutError
    from gnnscale.partition.parts import PartLayout

    _swapped_layout(tmp_path)
    with pytest.raises(LayoutError) as err:
        PartLayout(tmp_path / "L").open_part(0)
    assert str(err.value) == (
        f"{tmp_path / 'L' / 'part-0'} holds part 1, not part 0: the part folders were swapped "
        f"or renamed; move it back to {tmp_path / 'L' / 'part-1'} and part 0's folder to "
        f"{tmp_path / 'L' / 'part-0'}")


def _swapped_layout(tmp_path: Path) -> list[str]:
    """A 2-part layout whose part folders were swapped; the overrides that train from it."""
    from gnnscale.partition.cli import run as partition

    run = ["dataset=synthetic", "dataset.preset=tiny", "partitioner=random",
           "strategy=fullgraph", "deps=depcomm", "dist.world_size=2", f"parts={tmp_path / 'L'}"]
    partition(make_cfg(tmp_path, *run), log=lambda _m: None)
    os.rename(tmp_path / "L" / "part-0", tmp_path / "L" / "tmp")
    os.rename(tmp_path / "L" / "part-1", tmp_path / "L" / "part-0")
    os.rename(tmp_path / "L" / "tmp", tmp_path / "L" / "part-1")
    return run


@pytest.mark.slow
def test_each_hostile_input_is_one_line_and_exit_2(tmp_path):
    """Through train.py: status 2, one ``error:`` line, no traceback, for each."""
    cases = _bad_inputs(tmp_path)
    cases["swapped part folders"] = (_swapped_layout(tmp_path), "holds part 1, not part 0: "
                                     "the part folders were swapped or renamed")
    for name, (overrides, says) in cases.items():
        proc = subprocess.run([sys.executable, "train.py", f"hydra.run.dir={tmp_path / 'run'}",
                               f"data_root={tmp_path / 'data'}", "logger=none", *overrides],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        one_message(proc, says)
        assert len(proc.stderr.strip().splitlines()) == 1, (name, proc.stderr)
