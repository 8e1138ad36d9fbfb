"""Typed link prediction's tables (``LinkTask.predict`` on a typed graph): pairs of the task's
edge type carry the source and destination node types, a pairs file's ids are read in those
types, and ``top_k`` ranks the destination type's nodes only, equal to a dense stable argsort
over them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gnnscale
from gnnscale.runner.outputs import read_table
from gnnscale.tasks.link import predict as LP
from gnnscale.tasks.link.metrics import roc_auc

TYPED = ["dataset=hetero_sim", "dataset.scale=0.0005", "model=rgcn", "model.hidden=16",
         "model.num_layers=2", "task=link", "task.edge_type=writes", "task.dim=12",
         "task.decoder=mlp", "task.decoder_hidden=8", "strategy=fullgraph", "logger=none",
         "dist.world_size=1", "epochs=1", "eval_batch_size=512", "progress=false"]


@pytest.fixture(scope="module")
def typed_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("typed_link")
    return gnnscale.train(TYPED, run_dir=tmp / "run", data_root=tmp / "data")


def test_top_k_ranks_the_edge_types_destination_nodes_only(typed_run, tmp_path):
    loaded = typed_run._loaded
    g, task = loaded.graph, loaded.task
    s, _, d = task.edge_type
    assert s != d  # an edge type between two node types: the test tells them apart
    lo, hi = g._range(d)
    k = 5
    tables = typed_run.predict(out=tmp_path / "p", top_k=k, sources=[0, 3, 1])
    top = tables["top_k"]
    assert top["src_type"].tolist() == [s] * 3 and top["dst_type"].tolist() == [d] * 3
    assert top["src"].tolist() == [0, 3, 1] and top["dst"].shape == (3, k)
    rows = LP.node_rows(loaded.model, g)
    sources = g.to_global(s, torch.tensor([0, 3, 1]))
    with torch.no_grad():
        dense = task.score(rows[sources][:, None, :], rows[None, lo:hi, :]).reshape(3, hi - lo)
    want = torch.sort(dense.float(), dim=1, descending=True, stable=True)
    np.testing.assert_array_equal(top["dst"], want.indices[:, :k].numpy())  # local ids of d
    np.testing.assert_allclose(top["score"], want.values[:, :k].numpy(), rtol=1e-5, atol=1e-5)
    back = read_table(tmp_path / "p" / "top_k.parquet")
    assert back["dst_type"].tolist() == [d] * 3
    np.testing.assert_array_equal(back["dst"], top["dst"])
    every = typed_run.predict(top_k=1, chunk_sources=64, chunk_destinations=7)["top_k"]
    assert len(every["src"]) == g.num_nodes_of(s)  # every source of the edge type, no other
    np.testing.assert_array_equal(every["src"], np.arange(g.num_nodes_of(s)))
    assert (every["dst"] < hi - lo).all() and set(every["dst_type"]) == {d}


def test_pairs_carry_their_types_and_score_as_the_evaluation_did(typed_run, tmp_path):
    loaded = typed_run._loaded
    g, task = loaded.graph, loaded.task
    s, _, d = task.edge_type
    pairs = typed_run.predict(out=tmp_path / "p", pairs="test")["pairs"]
    assert list(pairs)[:4] == ["src_type", "src", "dst_type", "dst"]
    assert set(pairs["src_type"]) == {s} and set(pairs["dst_type"]) == {d}
    auc = roc_auc(torch.from_numpy(pairs["score"]).double(),
                  torch.from_numpy(pairs["label"]).double())
    assert auc == pytest.approx(typed_run.summary["final_test_auc"], abs=1e-6)
    back = read_table(tmp_path / "p" / "pairs.parquet")
    assert back["src_type"].tolist() == pairs["src_type"].tolist()
    assert back["dst_type"].tolist() == pairs["dst_type"].tolist()
    # a pairs file's ids: sources of s, destinations of d (local ids without an id map)
    given = typed_run.predict(pairs=(np.array([0, 2]), np.array([1, 1])))["pairs"]
    rows = LP.node_rows(loaded.model, g)
    with torch.no_grad():
        want = task.score_pairs(rows, g.to_global(s, torch.tensor([0, 2])),
                                g.to_global(d, torch.tensor([1, 1])))
    np.testing.assert_allclose(given["score"], want.numpy(), rtol=1e-5, atol=1e-6)
    assert given["src_type"].tolist() == [s, s] and given["dst_type"].tolist() == [d, d]
