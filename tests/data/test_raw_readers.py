"""The raw-file readers against PyG's on small files written here, and the pickle allow-list.

Planetoid raw files are pickles: gnnscale reads them with an allow-list, so a planted file
cannot run code; the graphs it builds are PyG's (same edges, features, labels, split).
"""

from __future__ import annotations

import pickle
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from gnnscale.data import safe_pickle
from gnnscale.data.npz import read_npz
from gnnscale.data.planetoid import PlanetoidDataset, read_planetoid
from tests._payload import RunsShell


def write_planetoid(folder: Path, prefix: str, gap: bool, seed: int = 0) -> None:
    """A small Planetoid layout: 12 labelled training rows, 500 validation rows, 6 test rows
    (listed out of order), repeated edges and a self loop; ``gap``: two test ids have no row
    in ``tx``/``ty`` (CiteSeer's isolated vertices)."""
    rng = np.random.default_rng(seed)
    f, c, n_train, n_all = 5, 3, 12, 520
    test = np.array([525, 521, 523, 520, 524, 522] if not gap else [527, 521, 523, 520, 524, 522])
    n = int(test.max()) + 1

    def feats(rows: int) -> sp.csr_matrix:
        return sp.csr_matrix(rng.integers(0, 3, (rows, f)).astype(np.float32))

    def onehot(rows: int) -> np.ndarray:
        return np.eye(c, dtype=np.int32)[rng.integers(0, c, rows)]

    graph = defaultdict(list)
    for v in range(n):
        graph[v] += [int(u) for u in rng.integers(0, n, 3)]
    graph[3] += [3, 7, 7]  # a self loop and a repeated edge
    allx = feats(n_all)
    items = {"x": allx[:n_train], "tx": feats(len(test)), "allx": allx, "y": onehot(n_train),
             "ty": onehot(len(test)), "ally": onehot(n_all), "graph": graph}
    folder.mkdir(parents=True, exist_ok=True)
    for name, obj in items.items():
        (folder / f"ind.{prefix}.{name}").write_bytes(pickle.dumps(obj, protocol=2))
    np.savetxt(folder / f"ind.{prefix}.test.index", test, fmt="%d")


@pytest.mark.parametrize("gap", [False, True], ids=["contiguous", "citeseer-gap"])
def test_planetoid_reader_builds_pygs_graph(tmp_path, gap):
    from torch_geometric.io.planetoid import read_planetoid_data

    prefix = "citeseer" if gap else "cora"  # PyG fills the gap for CiteSeer only
    write_planetoid(tmp_path, prefix, gap)
    ours = read_planetoid(tmp_path, prefix)
    ref = read_planetoid_data(str(tmp_path), prefix)  # files written above: safe to unpickle
    assert ours.num_nodes == ref.num_nodes
    assert torch.equal(ours.x, ref.x) and torch.equal(ours.y, ref.y)
    for split in ("train", "val", "test"):
        assert torch.equal(getattr(ours, f"{split}_idx"),
                           getattr(ref, f"{split}_mask").nonzero().reshape(-1))
    ei = ref.edge_index
    ei = torch.cat([ei, ei.flip(0)], 1).unique(dim=1)  # gnnscale stores the undirected graph
    dst = torch.repeat_interleave(torch.arange(ours.num_nodes), ours.indptr.diff())
    assert torch.equal(torch.stack([ours.indices, dst]).unique(dim=1), ei)
    assert ours.num_classes == 3
    if gap:  # the two isolated test vertices: zero features, class 0
        assert float(ours.x[525:527].abs().sum()) == 0 and ours.y[525:527].tolist() == [0, 0]


def test_planted_planetoid_file_is_refused_without_running_it(tmp_path):
    raw = tmp_path / "raw"
    write_planetoid(raw, "cora", gap=False)
    marker = tmp_path / "ran"
    (raw / "ind.cora.ally").write_bytes(pickle.dumps(RunsShell(marker), protocol=2))
    with pytest.raises(safe_pickle.UnsafePickleError, match=r"ind\.cora\.ally.*system"):
        PlanetoidDataset(tmp_path / "data", "cora", raw_dir=str(raw)).load()
    assert not marker.exists()
    assert isinstance(safe_pickle.UnsafePickleError("x"), pickle.UnpicklingError)


@pytest.mark.parametrize("payload", [
    pickle.dumps(eval), pickle.dumps(getattr), pickle.dumps(torch.zeros(2)),
], ids=["builtins.eval", "builtins.getattr", "torch-tensor"])
def test_allow_list_refuses_every_other_global(tmp_path, payload):
    path = tmp_path / "ind.cora.x"
    path.write_bytes(payload)
    with pytest.raises(safe_pickle.UnsafePickleError, match="refusing"):
        safe_pickle.load(path)


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_a_csr_matrix_pickled_by_current_scipy_is_read_as_data(tmp_path, protocol):
    m = sp.random(7, 5, density=0.4, format="csr", random_state=0, dtype=np.float64)
    path = tmp_path / "ind.cora.tx"
    path.write_bytes(pickle.dumps(m, protocol=protocol))
    assert np.array_equal(safe_pickle.dense(safe_pickle.load(path)), m.toarray())


def test_npz_reader_builds_pygs_graph(tmp_path):
    from torch_geometric.io import read_npz as pyg_read_npz

    rng = np.random.default_rng(1)
    n, f = 30, 6
    adj = sp.random(n, n, density=0.2, format="csr", random_state=2, dtype=np.float32)
    adj = adj + sp.eye(n, format="csr")  # self loops, dropped by both
    attr = sp.csr_matrix(rng.integers(0, 4, (n, f)).astype(np.float32))
    path = tmp_path / "g.npz"
    np.savez(path, adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr,
             adj_shape=adj.shape, attr_data=attr.data, attr_indices=attr.indices,
             attr_indptr=attr.indptr, attr_shape=attr.shape, labels=rng.integers(0, 3, n))
    edges, x, y = read_npz(path)
    ref = pyg_read_npz(str(path), to_undirected=True)
    assert torch.equal(x, ref.x) and torch.equal(y, ref.y)
    keep = edges[0] != edges[1]
    both = torch.cat([edges[:, keep], edges[:, keep].flip(0)], 1).unique(dim=1)
    assert torch.equal(both, ref.edge_index.unique(dim=1))


def test_npz_reader_names_missing_arrays(tmp_path):
    path = tmp_path / "g.npz"
    np.savez(path, labels=np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="not a gnn-benchmark npz file.*adj_data"):
        read_npz(path)
