"""Predictions and embeddings of a finished run keyed by the user's ids (``gnnscale.predict``,
``Run.predict``/``Run.embed``): equal to the run's own evaluation, the link top-k exact against
a dense stable argsort, ids from an IdMap in the processed folder, Parquet and ``.npy`` alike."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

import gnnscale
from gnnscale.data import processed
from gnnscale.data.idmap import IdMap
from gnnscale.errors import UserError
from gnnscale.predict.__main__ import main, parse
from gnnscale.runner import predict as P
from gnnscale.runner.outputs import read_table
from gnnscale.tasks.link import predict as LP
from gnnscale.tasks.link.metrics import roc_auc
from tests._train import TINY

ONE = [*TINY, "epochs=1", "dist.world_size=1", "progress=false"]


@pytest.fixture(scope="module")
def node_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("node")
    return gnnscale.train(ONE, run_dir=tmp / "run", data_root=tmp / "data")


@pytest.fixture(scope="module")
def link_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("link")
    return gnnscale.train([*ONE, "task=link", "task.dim=12", "task.decoder=mlp",
                           "task.decoder_hidden=8"], run_dir=tmp / "run",
                          data_root=tmp / "data")


def test_node_predictions_are_the_runs_evaluation(node_run, tmp_path):
    tables = node_run.predict(out=tmp_path / "p", format="npy")
    nodes = tables["nodes"]
    g = node_run.graph
    assert nodes["prob"].shape == (g.num_nodes, g.num_classes)
    np.testing.assert_allclose(nodes["prob"].sum(1), 1, rtol=1e-5)
    np.testing.assert_array_equal(nodes["id"], np.arange(g.num_nodes))  # no map: internal
    test = g.test_idx.numpy()
    acc = float((nodes["pred"][test] == g.y.numpy()[test]).mean())
    assert acc == pytest.approx(node_run.summary["final_test_acc"], abs=1e-9)
    back = read_table(tmp_path / "p" / "nodes")
    assert sorted(back) == ["id", "pred", "prob"]
    np.testing.assert_array_equal(back["prob"], nodes["prob"])
    only = node_run.predict(split="test")["nodes"]
    np.testing.assert_array_equal(only["id"], test)
    np.testing.assert_allclose(only["prob"], nodes["prob"][test], rtol=1e-5, atol=1e-6)


def test_keys_and_class_names_come_from_the_processed_folder(node_run, tmp_path):
    """An IdMap (and class names) saved into the dataset's folder key every output."""
    folder = P.dataset_folder(node_run.config)
    n, c = node_run.graph.num_nodes, node_run.graph.num_classes
    users = np.array([f"u{i:05d}" for i in range(n)])[::-1].copy()
    idmap = IdMap({"node": users}, {"node": np.array([f"class{k}" for k in range(c)])})
    graph = processed.load(folder, mmap=False)
    shutil.move(folder, tmp_path / "plain")  # the same graph, now with its ids beside it
    processed.save(graph, folder, side=idmap.files())
    try:
        tables = gnnscale.load_run(node_run.run_dir).predict(out=tmp_path / "p")
        nodes = tables["nodes"]
        np.testing.assert_array_equal(nodes["id"], users)
        np.testing.assert_array_equal(nodes["pred_name"],
                                      np.array([f"class{k}" for k in nodes["pred"]]))
        back = read_table(tmp_path / "p" / "nodes.parquet")
        assert back["id"].tolist() == users.tolist()
        assert {f"prob_class{k}" for k in range(c)} <= set(back)
        res = main([f"run_dir={node_run.run_dir}", f"out={tmp_path / 'cli'}", "format=npy",
                    "split=val", "progress=false"])
        ids = np.load(tmp_path / "cli" / "nodes" / "id.npy", allow_pickle=False)
        assert ids.tolist() == users[node_run.graph.val_idx.numpy()].tolist()
        assert res["nodes"]["prob"].shape[0] == ids.shape[0]
        emb = node_run.embed(out=tmp_path / "z.npy", layer=0, progress=False)
        z, zid = np.load(emb["path"]), np.load(emb["ids"], allow_pickle=False)
        assert z.shape == (n, 32) and zid.tolist() == users.tolist()
    finally:
        shutil.rmtree(folder)
        shutil.move(tmp_path / "plain", folder)


def test_link_pairs_score_as_the_evaluation_did(link_run):
    tables = link_run.predict(pairs="test")
    pairs = tables["pairs"]
    auc = roc_auc(torch.from_numpy(pairs["score"]).double(),
                  torch.from_numpy(pairs["label"]).double())
    assert auc == pytest.approx(link_run.summary["final_test_auc"], abs=1e-6)
    np.testing.assert_allclose(pairs["prob"], 1 / (1 + np.exp(-pairs["score"])), rtol=1e-5)


@pytest.mark.parametrize("decoder", ["mlp", "dot"])
def test_top_k_equals_a_dense_stable_argsort(link_run, decoder, monkeypatch):
    loaded = link_run._loaded
    if decoder == "dot":
        from gnnscale.tasks.link.decoders import DotDecoder

        monkeypatch.setattr(loaded.task, "head", DotDecoder())
    rows = LP.node_rows(loaded.model, loaded.graph)
    n = rows.shape[0]
    sources = torch.tensor([0, 5, 17, 1999, 42, 7])
    with torch.no_grad():
        dense = loaded.task.score(rows[sources][:, None, :], rows[None, :, :]).reshape(
            sources.numel(), n) if decoder == "mlp" else rows[sources] @ rows.T
    rows_tied = dense.clone()
    want = torch.sort(rows_tied, dim=1, descending=True, stable=True)
    for k in (1, 7, 50):
        values, idx = LP.top_k(loaded.task, rows, sources, k, chunk_sources=4,
                               chunk_destinations=300)
        torch.testing.assert_close(values, want.values[:, :k], rtol=1e-5, atol=1e-5)
        assert torch.equal(idx, want.indices[:, :k])


def test_top_k_breaks_ties_by_the_smaller_id():
    scores = torch.tensor([[1.0, 3.0, 3.0, 0.0, 3.0, 2.0, 3.0]])
    values, idx = LP._chunk_topk(scores, 2)
    assert idx.tolist() == [[1, 2]] and values.tolist() == [[3.0, 3.0]]
    merged = LP._ordered(torch.tensor([[3.0, 3.0, 5.0]]), torch.tensor([[9, 4, 6]]))
    assert merged[1].tolist() == [[6, 4, 9]]


def test_top_k_table_and_pairs_from_a_file(link_run, tmp_path):
    import pyarrow as pa
    import pyarrow.csv as pcsv

    pcsv.write_csv(pa.table({"src": [3, 4], "dst": [10, 11]}), tmp_path / "pairs.csv")
    tables = link_run.predict(out=tmp_path / "o", format="parquet",
                              pairs=str(tmp_path / "pairs.csv"), top_k=3, sources=[1, 2])
    assert tables["pairs"]["src"].tolist() == [3, 4]
    top = read_table(tmp_path / "o" / "top_k.parquet")
    assert top["src"].tolist() == [1, 2] and top["dst"].shape == (2, 3)
    np.testing.assert_array_equal(top["dst"], tables["top_k"]["dst"])
    assert (np.diff(top["score"], axis=1) <= 0).all()


def test_bad_requests_are_one_line(node_run, link_run, tmp_path):
    with pytest.raises(UserError, match="run_dir= is required"):
        parse(["top_k=3"])
    with pytest.raises(UserError, match="unknown argument"):
        parse(["run_dir=x", "topk=3"])
    with pytest.raises(UserError, match="link prediction's"):
        node_run.predict(top_k=3)
    with pytest.raises(UserError, match="pairs=FILE"):
        link_run.predict()
    with pytest.raises(UserError, match="is not a node"):
        link_run.predict(pairs=(np.array([0]), np.array([10**6])))
    with pytest.raises(UserError, match="format="):
        node_run.predict(format="csv")
    with pytest.raises(SystemExit) as err:
        main([f"run_dir={tmp_path}"])
    assert err.value.code == 2
