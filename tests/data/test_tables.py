"""dataset=tables: the user's node and edge tables (CSV, Parquet) read into the processed
graph, the id map kept and verified beside it, and every bad row named in one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from gnnscale.data import processed
from gnnscale.data.graph import GraphStore
from gnnscale.data.idmap import IdMap
from gnnscale.data.metadata import DatasetMeta
from gnnscale.data.tables import TableError, TablesDataset
from gnnscale.errors import ConfigError
from tests._train import make_cfg


def _csv(path: Path, header: str, *rows: str) -> str:
    path.write_text("\n".join([header, *rows]) + "\n")
    return str(path)


def _ring_tables(tmp_path: Path, n: int = 8) -> tuple[str, str]:
    """A CSV ring of ``n`` nodes with string ids in shuffled order, two numeric features, a
    class-name label (node 5 unlabelled), a split column and weights."""
    names = [f"n{(3 * i) % n}" for i in range(n)]  # table order != numeric order
    rows = [f"{u},{i},{i * 0.5},{'ab'[i % 2] if i != 5 else ''},"
            f"{['train', 'val', 'test', 'Train'][i % 4]}" for i, u in enumerate(names)]
    nodes = _csv(tmp_path / "nodes.csv", "id,f0,f1,label,split", *rows)
    edges = _csv(tmp_path / "edges.csv", "src,dst,w",
                 *(f"{names[i]},{names[(i + 1) % n]},{1 + i}" for i in range(n)))
    return nodes, edges


def _tables(tmp_path: Path, nodes: list, edges: list, **kw) -> TablesDataset:
    return TablesDataset(str(tmp_path / "data"), nodes=nodes, edges=edges, batch_rows=3, **kw)


def test_csv_string_ids_features_class_names_and_split(tmp_path):
    nodes, edges = _ring_tables(tmp_path)
    ds = _tables(tmp_path, [{"path": nodes, "features": ["f0", "f1"], "label": "label",
                             "split": "split"}],
                 [{"path": edges, "weight": "w"}], symmetrize=False)
    g = ds.load()
    n = 8
    ref = GraphStore.from_edge_index(torch.tensor([list(range(n)), [(i + 1) % n for i in
                                                                     range(n)]]), n)
    assert torch.equal(g.indptr, ref.indptr) and torch.equal(g.indices, ref.indices)
    assert g.node_types == ("node",) and g.edge_types == (("node", "to", "node"),)
    torch.testing.assert_close(g.x, torch.tensor([[i, i * 0.5] for i in range(n)]))
    assert g.y.tolist() == [0, 1, 0, 1, 0, -1, 0, 1]  # class names a, b in sorted order
    assert g.num_classes == 2
    assert g.train_idx.tolist() == [0, 3, 4, 7] and g.val_idx.tolist() == [1]  # 5: no label
    assert g.test_idx.tolist() == [2, 6]
    assert sorted(g.edge_weight.tolist()) == [float(1 + i) for i in range(n)]
    idmap = IdMap.load(ds.processed_dir)
    assert idmap.to_user("node", np.arange(3)).tolist() == ["n0", "n3", "n6"]
    assert idmap.to_internal("node", ["n6", "n1"]).tolist() == [2, 3]
    assert idmap.class_names("node").tolist() == ["a", "b"]


def test_parquet_integer_ids_list_features_and_missing_labels(tmp_path):
    ids = np.array([40, 10, 30, 20, 50])
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    pq.write_table(pa.table({"pid": ids, "emb": pa.array(list(x), pa.list_(pa.float32())),
                             "y": pa.array([1, 0, None, 2, 1], pa.int64())}),
                   tmp_path / "papers.parquet", row_group_size=2)
    pq.write_table(pa.table({"a": [40, 10, 30], "b": [10, 30, 50]}), tmp_path / "cites.pq")
    ds = _tables(tmp_path, [{"path": str(tmp_path / "papers.parquet"), "type": "paper",
                             "id": "pid", "features": "emb", "label": "y"}],
                 [{"path": str(tmp_path / "cites.pq"), "type": "cites", "src": "a",
                   "dst": "b"}])
    g = ds.load()
    assert g.node_types == ("paper",) and g.edge_types == (("paper", "cites", "paper"),)
    assert not g.is_typed and g.num_edges == 6  # symmetrized
    assert torch.equal(g.x, torch.from_numpy(x)) and g.y.tolist() == [1, 0, -1, 2, 1]
    splits = torch.cat([g.train_idx, g.val_idx, g.test_idx])
    assert sorted(splits.tolist()) == [0, 1, 3, 4]  # the unlabelled node is in none
    assert sorted(g.edge_index().t().tolist()) == sorted(
        [[0, 1], [1, 0], [1, 2], [2, 1], [2, 4], [4, 2]])
    idmap = IdMap.load(ds.processed_dir)
    assert idmap.ids["paper"].tolist() == ids.tolist() and idmap.class_names("paper") is None
    assert idmap.to_internal("paper", [50, 40]).tolist() == [4, 0]


def test_typed_graph_of_two_node_types(tmp_path):
    pq.write_table(pa.table({"id": ["p1", "p2", "p3"],
                             "emb": pa.array([[1.0, 0], [0, 1.0], [1.0, 1.0]]),
                             "venue": ["kdd", "icml", "kdd"],
                             "split": ["train", "val", "test"]}), tmp_path / "papers.parquet")
    _csv(tmp_path / "authors.tsv", "aid\tage", "7\t30", "3\t40")
    _csv(tmp_path / "writes.csv", "author,paper", "7,p1", "7,p2", "3,p3")
    _csv(tmp_path / "cites.csv", "src,dst", "p2,p1", "p3,p1")
    schema = tmp_path / "graph.yaml"
    schema.write_text(
        "nodes:\n"
        "  - {type: paper, path: papers.parquet, features: emb, label: venue, split: split}\n"
        "  - {type: author, path: authors.tsv, id: aid, features: [age]}\n"
        "edges:\n"
        "  - {type: [author, writes, paper], path: writes.csv, src: author, dst: paper}\n"
        "  - {type: [paper, cites, paper], path: cites.csv}\n")
    ds = TablesDataset(str(tmp_path / "data"), schema=str(schema))
    g = ds.load()
    assert g.name == "graph" and g.node_types == ("paper", "author")
    assert set(g.edge_types) == {("author", "writes", "paper"), ("paper", "cites", "paper"),
                                 ("paper", "rev_writes", "author")}
    assert dict(zip(g.edge_types, g.num_edges_per_type())) == {
        ("author", "writes", "paper"): 3, ("paper", "cites", "paper"): 4,
        ("paper", "rev_writes", "author"): 3}
    assert g.feature_dims == {"paper": 2, "author": 1} and g.target_types == ("paper",)
    assert g.features["author"].reshape(-1).tolist() == [30.0, 40.0]
    assert g.y.tolist() == [1, 0, 1, -1, -1] and g.train_idx.tolist() == [0]
    ptr, idx, _ = g.edge_type_csc(("author", "writes", "paper"))
    assert ptr.tolist() == [0, 1, 2, 3] and idx.tolist() == [0, 0, 1]  # author 7 wrote p1, p2
    idmap = IdMap.load(ds.processed_dir)
    assert idmap.ids["author"].tolist() == [7, 3] and idmap.ids["paper"].tolist() == \
        ["p1", "p2", "p3"]
    assert idmap.class_names("paper").tolist() == ["icml", "kdd"]
    meta = json.loads((ds.processed_dir / "meta.json").read_text())
    assert {"idends__paper", "idtext__paper", "ids__author", "classends__paper",
            "classtext__paper"} <= set(meta["arrays"])
    assert DatasetMeta.read(ds.processed_dir) == DatasetMeta.of(g)  # what the launcher reads


def test_the_id_map_is_verified_with_the_graph_and_a_changed_table_rebuilds(tmp_path):
    nodes, edges = _ring_tables(tmp_path)
    spec = {"nodes": [{"path": nodes, "label": "label"}], "edges": [{"path": edges}]}
    ds = _tables(tmp_path, **spec)
    first = ds.load()
    folder = ds.processed_dir
    assert IdMap.load(folder).ids["node"].tolist()[:2] == ["n0", "n3"]
    ids_file = folder / "idtext__node.npy"  # the ids' UTF-8 bytes
    saved = ids_file.read_bytes()
    np.save(ids_file, np.load(ids_file)[::-1].copy())  # same shape, other ids
    with pytest.raises(processed.ProcessedDataError, match="idtext__node.npy: checksum "
                                                           "mismatch"):
        IdMap.load(folder)
    with pytest.raises(processed.ProcessedDataError, match="idtext__node.npy: checksum "
                                                           "mismatch"):
        processed.load(folder)
    ids_file.write_bytes(saved)
    np.save(folder / "ids__other.npy", np.arange(3))
    with pytest.raises(processed.ProcessedDataError, match="ids__other.npy: is not listed"):
        IdMap.load(folder)
    os.remove(folder / "ids__other.npy")
    assert IdMap.load(folder).to_user("node", [1]).tolist() == ["n3"]
    with pytest.raises(ValueError, match=r"ids__node is <i8 \[3\]: int64 or unicode \[8\] "
                                         "expected"):  # a map of another graph is not saved
        processed.save(processed.load(folder), tmp_path / "other", side={
            "ids__node": np.arange(3)})
    assert not (tmp_path / "other").exists()
    # one more node in the table: a new key, processed again, the map follows
    Path(nodes).write_text(Path(nodes).read_text() + "n8,8,4.0,b,train\n")
    again = _tables(tmp_path, **spec)
    assert again.processed_dir != folder
    assert again.load().num_nodes == first.num_nodes + 1
    assert IdMap.load(again.processed_dir).to_internal("node", ["n8"]).tolist() == [8]


def test_train_on_tables_for_two_epochs(tmp_path):
    from gnnscale.runner.run import run

    rng = np.random.default_rng(0)
    n, classes = 300, 3
    y = rng.integers(0, classes, n)
    x = np.eye(classes)[y] + rng.normal(0, 0.3, (n, classes))
    rows = [f"v{i},{x[i, 0]:.3f},{x[i, 1]:.3f},{x[i, 2]:.3f},{'xyz'[y[i]]}" for i in range(n)]
    _csv(tmp_path / "v.csv", "id,a,b,c,cls", *rows)
    src, dst = rng.integers(0, n, 3000), rng.integers(0, n, 3000)
    same = np.flatnonzero(y[dst] == y[src])[:1000]  # edges within a class
    _csv(tmp_path / "e.csv", "s,d", *(f"v{src[i]},v{dst[i]}" for i in same))
    (tmp_path / "t.yaml").write_text(
        "nodes: [{path: v.csv, features: [a, b, c], label: cls}]\n"
        "edges: [{path: e.csv, src: s, dst: d}]\n")
    cfg = make_cfg(tmp_path, "dataset=tables", f"dataset.schema={tmp_path / 't.yaml'}",
                   "model.hidden=16", "model.num_layers=2", "sampler.fanouts=[5,5]",
                   "strategy.batch_size=16", "epochs=2", "dist.world_size=1", "logger=none",
                   "checkpoint=false")
    res = run(cfg)
    assert [h["epoch"] for h in res["history"]] == [0, 1]
    assert res["history"][1]["train_loss"] < res["history"][0]["train_loss"]
    assert res["summary"]["final_test_acc"] > 0.6  # chance: 1/3


BAD = {
    "unknown id in an edge table": (
        "edges", "src,dst\nn0,n3\nn3,zz\n", "edges.csv:row 2 column dst: unknown id 'zz': the "
        "'node' node table ({nodes}, column id) has no such node"),
    "duplicate node id": (
        "nodes", "id,f0,f1,label,split\nn0,1,1,a,train\nn1,1,1,a,train\nn0,2,2,b,val\n",
        "nodes.csv:row 3 column id: duplicate node id 'n0' (also at row 1)"),
    "missing column": (
        "nodes", "id,f0,label,split\nn0,1,a,train\n",
        "nodes.csv: column f1: missing (named by features; the file has columns id, f0, "
        "label, split)"),
    "non-numeric feature": (
        "nodes", "id,f0,f1,label,split\nn0,1,1,a,train\nn1,1,1,a,train\nn2,1,1,a,train\n"
        "n3,x1,1,a,train\n", "nodes.csv:row 4 column f0: 'x1' is not a number"),
    "missing feature": (
        "nodes", "id,f0,f1,label,split\nn0,1,,a,train\n",
        "nodes.csv:row 1 column f1: missing value"),
    "unknown split value": (
        "nodes", "id,f0,f1,label,split\nn0,1,1,a,train\nn1,1,1,a,dev\n",
        "nodes.csv:row 2 column split: unknown split 'dev': train, val or test expected "
        "(empty: in no split)"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_each_bad_input_is_one_line_naming_file_row_and_column(tmp_path, case):
    nodes, edges = _ring_tables(tmp_path, n=4)
    which, text, message = BAD[case]
    Path(nodes if which == "nodes" else edges).write_text(text)
    with pytest.raises(TableError) as err:
        _tables(tmp_path, [{"path": nodes, "features": ["f0", "f1"], "label": "label",
                            "split": "split"}], [{"path": edges}]).load()
    got = str(err.value)
    assert "\n" not in got
    assert got == str(tmp_path / message.format(nodes=nodes))


def test_a_list_of_the_wrong_length_and_a_bad_table_before_any_rank(tmp_path):
    _csv(tmp_path / "n.csv", "id,emb", '1,"[1, 2]"', "2,3;4", "3,5 6 7")
    edges = _csv(tmp_path / "e.csv", "src,dst", "1,2")
    with pytest.raises(TableError, match=r"n.csv:row 3 column emb: a list of 3 values, but the "
                                         r"column's first row has 2"):
        _tables(tmp_path, [{"path": str(tmp_path / "n.csv"), "features": "emb"}],
                [{"path": edges}]).load()
    from gnnscale.runner.validate import validate

    _csv(tmp_path / "n.csv", "id,emb,y", '1,"[1, 2]",0', "2,3;4,1", "3,5 6,1")
    cfg = make_cfg(tmp_path, "dataset=tables", "logger=none",
                   f"dataset.nodes=[{{path: '{tmp_path / 'n.csv'}', features: emb, label: y}}]",
                   f"dataset.edges=[{{path: '{tmp_path / 'e.csv'}', src: dst, dst: src}}]")
    validate(cfg)  # a good config passes and processes the tables here, in the launcher
    _csv(tmp_path / "e.csv", "src,dst", "1,2", "2,9")
    with pytest.raises(TableError, match=r"e.csv:row 2 column dst: unknown id 9"):
        validate(cfg)
    cfg.dataset.nodes[0].type = "paper"
    cfg.dataset.edges[0].type = ["paper", "cites", "venue"]
    with pytest.raises(ConfigError, match=r"edges\[0\].type \['paper', 'cites', 'venue'\] "
                                          "names node type 'venue', which no node table has"):
        validate(cfg)


def test_string_ids_are_found_by_hash_and_by_strings_when_hashes_collide(tmp_path, monkeypatch):
    from gnnscale.data import tables

    words = pa.array(["", "a", "ab", "ba", "abc", "é", "a" * 40], pa.large_string())
    whole = tables.text_hash(words)
    assert len(set(whole.tolist())) == len(words)
    assert tables.text_hash(words.slice(2, 3)).tolist() == whole[2:5].tolist()
    assert tables.text_hash(words.cast(pa.string())).tolist() == whole.tolist()
    nodes, edges = _ring_tables(tmp_path)
    spec = ([{"path": nodes, "label": "label"}], [{"path": edges}])
    hashed = _tables(tmp_path, *spec).load()
    monkeypatch.setattr(tables, "text_hash", lambda arr: np.zeros(len(arr), np.uint64))
    parts, found = _tables(tmp_path, *spec).read()
    assert not parts["node"].index.hashed  # every hash collides: the strings are indexed
    (ei, _, _), = found.values()
    assert sorted(map(tuple, ei.T.tolist())) == sorted(
        (i, (i + 1) % 8) for i in range(8))
    assert hashed.num_edges == 16


def test_string_id_tables_train_and_predictions_and_embeddings_come_back_keyed_by_them(
        tmp_path):
    """The whole way: the user's CSV tables with string ids train from Python, and the run's
    predictions and embeddings are keyed by those ids (class names too)."""
    import gnnscale

    rng = np.random.default_rng(1)
    n = 120
    y = rng.integers(0, 2, n)
    users = [f"user-{(7 * i) % n:03d}" for i in range(n)]  # table order != sorted order
    rows = [f"{users[i]},{y[i] + rng.normal(0, .3):.3f},{'ab'[y[i]]}" for i in range(n)]
    _csv(tmp_path / "v.csv", "id,f,cls", *rows)
    src, dst = rng.integers(0, n, 600), rng.integers(0, n, 600)
    _csv(tmp_path / "e.csv", "s,d", *(f"{users[a]},{users[b]}" for a, b in zip(src, dst)))
    (tmp_path / "t.yaml").write_text("nodes: [{path: v.csv, features: [f], label: cls}]\n"
                                     "edges: [{path: e.csv, src: s, dst: d}]\n")
    run = gnnscale.train(["dataset=tables", f"dataset.schema={tmp_path / 't.yaml'}",
                          "model.hidden=8", "model.num_layers=2", "sampler.fanouts=[4,4]",
                          "strategy.batch_size=32", "epochs=1", "dist.world_size=1",
                          "logger=none", "progress=false"],
                         run_dir=tmp_path / "run", data_root=tmp_path / "data")
    nodes = run.predict(out=tmp_path / "pred", progress=False)["nodes"]
    assert sorted(nodes["id"].tolist()) == sorted(users)
    assert set(nodes["pred_name"].tolist()) <= {"a", "b"}
    emb = run.embed(out=tmp_path / "z.npy", progress=False)
    ids = np.load(emb["ids"], allow_pickle=False)
    assert ids.tolist() == users  # internal order = the node table's order
    assert np.load(emb["path"]).shape[0] == n


def test_edge_feature_columns_become_the_graphs_edge_attr(tmp_path):
    """An edge table's feature columns (numeric columns, or a Parquet list column) are the
    edge type's edge features, each row with its edge (and a reverse type's a copy)."""
    _csv(tmp_path / "a.csv", "id,f", "x,1", "y,2", "z,3")
    _csv(tmp_path / "e.csv", "src,dst,year,score", "x,y,2001,0.5", "y,z,2002,0.25",
         "x,z,2003,1.0")
    ds = _tables(tmp_path, [{"path": str(tmp_path / "a.csv"), "features": ["f"]}],
                 [{"path": str(tmp_path / "e.csv"), "features": ["year", "score"]}],
                 symmetrize=False)
    g = ds.load()
    src, dst = g.edge_index()
    got = {(int(s), int(d)): g.edge_attr[e].tolist() for e, (s, d) in enumerate(zip(src, dst))}
    assert got == {(0, 1): [2001.0, 0.5], (1, 2): [2002.0, 0.25], (0, 2): [2003.0, 1.0]}
    pq.write_table(pa.table({"p": ["x", "y"], "q": ["y", "y"],
                             "w": pa.array([[1.0, 2.0], [3.0, 4.0]])}), tmp_path / "t.parquet")
    typed = TablesDataset(str(tmp_path / "data2"), nodes=[
        {"type": "a", "path": str(tmp_path / "a.csv"), "features": ["f"]},
        {"type": "b", "path": str(tmp_path / "a.csv"), "features": ["f"]}],
        edges=[{"type": ["a", "to", "b"], "path": str(tmp_path / "t.parquet"), "src": "p",
                "dst": "q", "features": "w"}]).load()
    for et in (("a", "to", "b"), ("b", "rev_to", "a")):
        assert sorted(typed.edge_attrs[et].tolist()) == [[1.0, 2.0], [3.0, 4.0]]
