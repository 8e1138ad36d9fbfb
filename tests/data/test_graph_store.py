"""Graph store: CSC construction, processed format round trip, memory-mapped sharing, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from gnnscale.data import processed
from gnnscale.data.base import Dataset
from gnnscale.data.graph import GraphStore
from gnnscale.distributed import spawn
from tests import _store_fns

ARRAYS = processed.ARRAYS


def neighbors(g: GraphStore, v: int) -> list[int]:
    return g.indices[g.indptr[v]:g.indptr[v + 1]].tolist()


def assert_same_graph(a: GraphStore, b: GraphStore) -> None:
    for name in ARRAYS:
        ta, tb = getattr(a, name), getattr(b, name)
        assert (ta is None) == (tb is None), name
        if ta is not None:
            assert ta.dtype == tb.dtype and torch.equal(ta, tb), name
    assert a.num_classes == b.num_classes and a.name == b.name


# ---- construction from edge lists ------------------------------------------------------------

def test_from_edge_index_builds_sorted_csc_over_destinations():
    ei = torch.tensor([[1, 2, 0, 2], [0, 0, 1, 1]])  # sources row 0, destinations row 1
    g = GraphStore.from_edge_index(ei, 3)
    assert g.indptr.tolist() == [0, 2, 4, 4]
    assert neighbors(g, 0) == [1, 2] and neighbors(g, 1) == [0, 2] and neighbors(g, 2) == []
    assert g.in_degree().tolist() == [2, 2, 0]
    assert g.out_degree().tolist() == [1, 1, 2]
    back = g.edge_index()
    assert sorted(zip(*back.tolist())) == sorted(zip(*ei.tolist()))


def test_dedupe_keeps_first_weight_and_can_be_disabled():
    ei = torch.tensor([[0, 0, 1, 0], [1, 1, 2, 1]])
    w = torch.tensor([5.0, 6.0, 7.0, 8.0])
    g = GraphStore.from_edge_index(ei, 3, edge_weight=w)
    assert g.num_edges == 2
    assert neighbors(g, 1) == [0] and g.edge_weight.tolist() == [5.0, 7.0]
    keep = GraphStore.from_edge_index(ei, 3, dedupe=False, edge_weight=w)
    assert keep.num_edges == 4 and neighbors(keep, 1) == [0, 0, 0]
    assert keep.edge_weight.tolist() == [5.0, 6.0, 8.0, 7.0]


def test_symmetrize_adds_reverse_edges_once():
    ei = torch.tensor([[0, 1, 2], [1, 0, 3]])
    g = GraphStore.from_edge_index(ei, 4, symmetrize=True)
    edges = set(zip(*g.edge_index().tolist()))
    assert edges == {(0, 1), (1, 0), (2, 3), (3, 2)}
    assert g.num_edges == 4


@pytest.mark.parametrize("mode, expected", [
    ("keep", {(0, 0), (0, 1)}),
    ("remove", {(0, 1)}),
    ("add", {(0, 0), (0, 1), (1, 1), (2, 2)}),
])
def test_self_loop_modes(mode, expected):
    ei = torch.tensor([[0, 0], [0, 1]])
    g = GraphStore.from_edge_index(ei, 3, self_loops=mode)
    assert set(zip(*g.edge_index().tolist())) == expected


def test_int32_indices_and_numpy_input():
    g = GraphStore.from_edge_index(np.array([[0, 1], [1, 2]], dtype=np.int32), 3,
                                   index_dtype=torch.int32)
    assert g.indices.dtype == torch.int32 and g.indptr.dtype == torch.int64


@pytest.mark.parametrize("edge_index, num_nodes, error, match", [
    (torch.tensor([[0, 1, 2]]), 3, ValueError, r"shape \[2, E\]"),
    (torch.zeros(3, 2, dtype=torch.long), 3, ValueError, r"shape \[2, E\]"),
    (torch.tensor([[0.0, 1.0], [1.0, 0.0]]), 2, TypeError, "integer ids"),
    (torch.tensor([[0, 5], [1, 0]]), 3, ValueError, r"\[0, 5\].*num_nodes = 3"),
    (torch.tensor([[0, -1], [1, 0]]), 3, ValueError, r"\[0, num_nodes\)"),
])
def test_malformed_edge_lists_raise_clear_errors(edge_index, num_nodes, error, match):
    with pytest.raises(error, match=match):
        GraphStore.from_edge_index(edge_index, num_nodes)


def test_bad_options_and_inconsistent_fields_raise():
    ei = torch.tensor([[0], [1]])
    with pytest.raises(ValueError, match="self_loops"):
        GraphStore.from_edge_index(ei, 2, self_loops="drop")
    with pytest.raises(ValueError, match="one entry per edge"):
        GraphStore.from_edge_index(ei, 2, edge_weight=torch.ones(3))
    with pytest.raises(ValueError, match="x has 5 rows for 2 nodes"):
        GraphStore.from_edge_index(ei, 2, x=torch.zeros(5, 1))
    with pytest.raises(TypeError, match="indptr must be int64"):
        GraphStore(indptr=torch.zeros(3, dtype=torch.int32), indices=torch.zeros(0).long())
    with pytest.raises(ValueError, match="indptr"):
        GraphStore(indptr=torch.tensor([0, 2]), indices=torch.zeros(1).long())


# ---- processed format -------------------------------------------------------------------------

def test_round_trip_is_equal_and_checksum_stable(tiny_graph, tmp_path):
    digest = processed.save(tiny_graph, tmp_path / "a")
    assert digest == processed.checksum(tiny_graph)
    assert processed.save(tiny_graph, tmp_path / "b") == digest  # same content, same digest
    loaded = processed.load(tmp_path / "a", verify=True)
    assert_same_graph(loaded, tiny_graph)
    assert loaded.meta["checksum"] == digest
    assert processed.checksum(loaded) == digest
    meta = json.loads((tmp_path / "a" / "meta.json").read_text())
    assert meta["num_nodes"] == tiny_graph.num_nodes
    assert meta["arrays"]["x"]["shape"] == list(tiny_graph.x.shape)
    assert meta["arrays"]["x"]["dtype"] == "<f4" and len(meta["arrays"]["x"]["sha256"]) == 32
    eager = processed.load(tmp_path / "a", mmap=False)
    assert_same_graph(eager, tiny_graph)


def test_checksum_detects_changed_content(tiny_graph, tmp_path):
    processed.save(tiny_graph, tmp_path / "g")
    x = np.load(tmp_path / "g" / "x.npy")
    x[0, 0] += 1.0
    np.save(tmp_path / "g" / "x.npy", x)
    with pytest.raises(ValueError, match="checksum mismatch"):
        processed.load(tmp_path / "g", verify=True)


def test_loaded_arrays_are_file_backed_copy_on_write(tiny_graph, tmp_path):
    processed.save(tiny_graph, tmp_path / "g")
    g = processed.load(tmp_path / "g")
    assert _store_fns.mapped_file(g.x.data_ptr()) == str(tmp_path / "g" / "x.npy")
    assert _store_fns.mapped_file(g.indices.data_ptr()) == str(tmp_path / "g" / "indices.npy")
    g.x[0, 0] = 123.0  # copy-on-write: the file keeps its content
    assert processed.load(tmp_path / "g", verify=True).x[0, 0] != 123.0
    eager = processed.load(tmp_path / "g", mmap=False)
    assert _store_fns.mapped_file(eager.x.data_ptr()) is None


def test_spawned_ranks_share_the_mapped_files(tiny_graph, tmp_path):
    digest = processed.save(tiny_graph, tmp_path / "g")
    out = spawn(_store_fns.load_shared_rank, 2, str(tmp_path / "g"), timeout_s=90)
    for rank, res in enumerate(out):
        assert res["rank"] == rank
        assert res["x_file"] == str(tmp_path / "g" / "x.npy")
        assert res["indices_file"] == str(tmp_path / "g" / "indices.npy")
        assert res["checksum"] == digest


def test_load_errors_are_clear(tiny_graph, tmp_path):
    with pytest.raises(FileNotFoundError, match="meta.json"):
        processed.load(tmp_path / "nothing")
    processed.save(tiny_graph, tmp_path / "g")
    meta = json.loads((tmp_path / "g" / "meta.json").read_text())
    meta["format"] = 99
    (tmp_path / "g" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="field format is 99.*delete .* rebuilt"):
        processed.load(tmp_path / "g")


class CountingDataset(Dataset):
    """A real Dataset over a fixed graph that counts how often it is processed."""

    def __init__(self, root, graph):
        super().__init__(root)
        self.graph, self.calls = graph, 0

    @property
    def key(self) -> str:
        return "counting"

    def process(self) -> GraphStore:
        self.calls += 1
        return self.graph


def test_dataset_processes_once_then_memory_maps(tiny_graph, tmp_path):
    ds = CountingDataset(tmp_path, tiny_graph)
    first = ds.load()
    second = ds.load()
    assert ds.calls == 1
    assert (tmp_path / "counting" / "processed" / "meta.json").is_file()
    assert_same_graph(first, tiny_graph)
    assert _store_fns.mapped_file(second.x.data_ptr()) is not None


class SeededSplitDataset(Dataset):
    """A real Dataset whose split is a seeded draw over one graph (as the npz graphs' split)."""

    def __init__(self, root, seed: int):
        super().__init__(root)
        self.seed = seed

    @property
    def key(self) -> str:
        return f"wide-seed{self.seed}"

    def process(self) -> GraphStore:
        gen = torch.Generator().manual_seed(0)
        n = 600  # 600 x 512 float32 features: 1.2 MB, above SHARE_MIN_BYTES
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(self.seed))
        return GraphStore.from_edge_index(
            torch.randint(0, n, (2, 3000), generator=gen), n, x=torch.rand(n, 512, generator=gen),
            y=torch.randint(0, 3, (n,), generator=gen), train_idx=perm[:60], val_idx=perm[60:120],
            test_idx=perm[120:], num_classes=3, name="wide")


def test_split_copies_share_their_features_not_their_splits(tmp_path):
    a, b = SeededSplitDataset(tmp_path, 0).load(), SeededSplitDataset(tmp_path, 1).load()
    x_a, x_b = (tmp_path / f"wide-seed{s}" / "processed" / "x.npy" for s in (0, 1))
    assert x_a.stat().st_ino == x_b.stat().st_ino  # one file on disk, two names
    small = [(tmp_path / f"wide-seed{s}" / "processed" / "train_idx.npy").stat().st_ino
             for s in (0, 1)]
    assert small[0] != small[1]
    assert torch.equal(a.x, b.x) and not torch.equal(a.train_idx, b.train_idx)
    assert a.meta["checksum"] != b.meta["checksum"]
    for s in (0, 1):  # each copy verifies in full after the link
        processed.load(tmp_path / f"wide-seed{s}" / "processed", verify=True)


def test_a_changed_copy_is_not_shared(tmp_path):
    SeededSplitDataset(tmp_path, 0).load()
    x_a = tmp_path / "wide-seed0" / "processed" / "x.npy"
    x = np.load(x_a)
    x[0, 0] += 1.0  # damaged after it was written: its digest no longer matches meta.json
    np.save(x_a, x)
    b = SeededSplitDataset(tmp_path, 1).load()
    x_b = tmp_path / "wide-seed1" / "processed" / "x.npy"
    assert x_b.stat().st_ino != x_a.stat().st_ino
    assert_same_graph(processed.load(x_b.parent, verify=True), b)
    assert float(b.x[0, 0]) != float(x[0, 0])


def test_publish_folder_first_complete_copy_wins_and_cleans(tmp_path):
    from gnnscale.data.processed import publish_folder

    def staged(text: str, marker: bool = True):
        d = tmp_path / f"stage-{text}"
        d.mkdir()
        (d / "data.txt").write_text(text)
        if marker:
            (d / "done").write_text("")
        return d

    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "data.txt").write_text("half-written")  # an interrupted save: no marker
    publish_folder(staged("a"), dest, "done")
    assert (dest / "data.txt").read_text() == "a"
    assert not publish_folder(staged("b"), dest, "done")  # a complete copy is kept
    assert (dest / "data.txt").read_text() == "a"
    assert publish_folder(staged("c"), dest, "done", replace=True)  # unless asked to replace
    assert (dest / "data.txt").read_text() == "c"
    assert oct(dest.stat().st_mode & 0o777) != oct(0o700)  # not mkdtemp's private mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temp folders left


def test_write_text_atomic_replaces_whole_file_and_leaves_no_temp(tmp_path, monkeypatch):
    import os

    from gnnscale.data.publish import write_text_atomic

    path = tmp_path / "results.json"
    path.write_text("old")
    dead = tmp_path / f".results.json.tmp{2**22 + 7}@{os.uname().nodename}.x.part"
    dead.write_text("left by a killed writer")
    write_text_atomic(path, "new")
    assert path.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]

    def half_then_fail(self, text, *a, **k):  # a disk that fills half-way through
        with open(self, "w") as f:
            f.write(text[: len(text) // 2])
        raise OSError("No space left on device")

    monkeypatch.setattr(type(path), "write_text", half_then_fail)
    with pytest.raises(OSError, match="No space"):
        write_text_atomic(path, "a longer new text")
    monkeypatch.undo()
    assert path.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]
