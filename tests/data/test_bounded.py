"""Processing and partitioning in bounded memory (gnnscale.data.bounded, METIS's refusal)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnscale.data import bounded, processed
from gnnscale.data.custom import CustomDataset
from gnnscale.data.graph import GraphStore
from gnnscale.errors import ConfigError
from gnnscale.partition import metis
from gnnscale.partition.ldg import LdgPartitioner


def _edges(n: int = 2000, e: int = 30000) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(1)
    ei = torch.from_numpy(rng.integers(0, n, (2, e)))
    ei[:, :400] = ei[:, 400:800]  # repeated edges: the first one's weight must win
    return ei, torch.from_numpy(rng.random(e).astype(np.float32))


@pytest.mark.parametrize("symmetrize,self_loops,dedupe",
                         [(True, "remove", True), (False, "add", True), (True, "keep", False)])
def test_out_of_core_csc_is_bit_identical_with_many_buckets(tmp_path, symmetrize, self_loops,
                                                            dedupe):
    ei, w = _edges()
    attr = torch.from_numpy(np.random.default_rng(2).random((ei.shape[1], 3)).astype(np.float32))
    ref = GraphStore.from_edge_index(ei, 2000, symmetrize=symmetrize, self_loops=self_loops,
                                     dedupe=dedupe, edge_weight=w, edge_attr=attr)
    stage = bounded.Stage(tmp_path)
    budget = 600_000  # a few thousand edges a bucket: about 15 buckets here
    indptr, indices, wts, rows = bounded.staged_csc(stage, ei[0], ei[1], w, 2000, symmetrize,
                                                    self_loops, dedupe, budget, torch.int64,
                                                    "t", attr)  # feature rows move too
    assert torch.equal(indptr, ref.indptr) and torch.equal(indices, ref.indices)
    assert torch.equal(wts, ref.edge_weight) and torch.equal(rows, ref.edge_attr)
    assert stage.files["indices"][1] == processed.array_digest(ref.indices.numpy())
    assert stage.files["edge_weight"][1] == processed.array_digest(ref.edge_weight.numpy())
    assert stage.files["edge_attr"][1] == processed.array_digest(ref.edge_attr.numpy())


def test_out_of_core_typed_csc_moves_edge_features_read_in_chunks(tmp_path):
    """Typed edge features read a chunk at a time from an .npz (every type one width: one
    matrix; only some types, or several widths: per type) move with their edges through
    the on-disk buckets: the graph equals the in-memory build, checksum included."""
    import zipfile

    rng = np.random.default_rng(3)
    p, a = 1500, 1000
    writes = np.stack([rng.integers(0, a, 9000), rng.integers(0, p, 9000)])
    writes[:, :300] = writes[:, 300:600]  # repeated edges: the first one's row must win
    np.savez(tmp_path / "e.npz", w=writes, c=rng.integers(0, p, (2, 6000)),
             aw=rng.random((9000, 3)), ac=rng.random((6000, 3)), ac5=rng.random((6000, 5)))
    info = {i.filename[:-4]: i for i in zipfile.ZipFile(tmp_path / "e.npz").infolist()}
    arrays = np.load(tmp_path / "e.npz")
    wt, ct = ("author", "writes", "paper"), ("paper", "cites", "paper")
    for label, names in (("one", {wt: "aw", ct: "ac"}), ("some", {wt: "aw"}),
                         ("widths", {wt: "aw", ct: "ac5"})):
        ref = GraphStore.from_typed(
            {"paper": p, "author": a}, {wt: arrays["w"], ct: arrays["c"]}, add_reverse=True,
            edge_attr={et: torch.from_numpy(arrays[n]).float() for et, n in names.items()})
        (tmp_path / label).mkdir()
        stage = bounded.Stage(tmp_path / label, memory_budget=700_000)  # about 20 buckets
        got = GraphStore.from_typed(
            {"paper": p, "author": a}, {wt: bounded.EdgeSource.member(
                tmp_path / "e.npz", info["w"], "w"), ct: bounded.EdgeSource.member(
                tmp_path / "e.npz", info["c"], "c")}, add_reverse=True, stage=stage,
            edge_attr={et: bounded.RowSource(tmp_path / "e.npz", info[n], n)
                       for et, n in names.items()})
        assert any(n.startswith("edge_attr") for n in stage.files), label  # built out of core
        assert processed.checksum(got) == processed.checksum(ref), label
        assert torch.equal(got.indices, ref.indices) and set(got.edge_attrs) == \
            set(ref.edge_attrs), label
        for et, rows in ref.edge_attrs.items():
            assert torch.equal(got.edge_attrs[et], rows), (label, et)


def _npz(path, n: int = 600, f: int = 24):
    rng = np.random.default_rng(0)
    x = rng.random((n, f)).astype(np.float64)  # converted to float32 per chunk
    np.savez(path, x=x, edge_index=rng.integers(0, n, (2, 5000)), y=rng.integers(0, 4, n))


@pytest.mark.parametrize("norm", ["none", "row"])
def test_streamed_features_and_budgeted_csc_equal_the_in_memory_processing(tmp_path,
                                                                           monkeypatch, norm):
    _npz(tmp_path / "g.npz")
    ref = CustomDataset(root=str(tmp_path / "a"), path=str(tmp_path / "g.npz"),
                        feature_norm=norm)
    arrays = np.load(tmp_path / "g.npz")
    from gnnscale.data.base import normalize_features
    from gnnscale.data.custom import graph_from_arrays
    whole = normalize_features(graph_from_arrays(dict(arrays), ref.path, True, 0.6, 0.2, 0),
                               norm)  # today's build: every array in memory
    whole.name = ref.path.stem
    monkeypatch.setattr(bounded, "CHUNK_BYTES", 1000)  # many feature chunks
    got = CustomDataset(root=str(tmp_path / "b"), path=str(tmp_path / "g.npz"),
                        feature_norm=norm, memory_budget="16MiB").load()
    assert torch.equal(got.x, whole.x) and torch.equal(got.indices, whole.indices)
    assert processed.checksum(got) == processed.checksum(ref.load())
    assert not list((tmp_path / "b").glob("*/.staging*"))  # the staging folder is gone


def test_a_budget_too_small_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"^dataset.memory_budget='1MB' is too small to "
                                          r"process anything: give at least 16MiB$"):
        CustomDataset(root=str(tmp_path), path=str(tmp_path / "g.npz"), memory_budget="1MB")
    ei, _ = _edges(n=200_000, e=1000)
    with pytest.raises(ConfigError) as err:
        bounded.staged_csc(bounded.Stage(tmp_path), ei[0], ei[1], None, 200_000, True, "keep",
                           True, 1 << 20, torch.int64, "g")
    assert "\n" not in str(err.value) and "its 200,000 nodes alone need" in str(err.value)


def test_metis_refuses_a_graph_beyond_the_available_memory(monkeypatch):
    ei, _ = _edges(n=500, e=3000)
    g = GraphStore.from_edge_index(ei, 500, symmetrize=True, name="g")
    monkeypatch.setattr(metis, "available_memory", lambda: metis.peak_estimate(500, 10))
    with pytest.raises(ConfigError, match="use partitioner=ldg or partitioner=fennel") as err:
        metis.MetisPartitioner().partition(g, 2)
    assert "\n" not in str(err.value)
    monkeypatch.setattr(metis, "available_memory", lambda: None)  # unknown: not refused
    assert metis.MetisPartitioner().partition(g, 2).num_parts == 2


def test_streaming_partitioner_on_the_out_of_core_graph_is_unchanged(tmp_path):
    ei, _ = _edges()
    ref = GraphStore.from_edge_index(ei, 2000, symmetrize=True)
    indptr, indices, _, _ = bounded.staged_csc(bounded.Stage(tmp_path), ei[0], ei[1], None,
                                               2000, True, "keep", True, 600_000, torch.int64,
                                               "t")
    mapped = GraphStore(indptr=indptr, indices=indices)  # indices memory-mapped from disk
    assert torch.equal(LdgPartitioner().assign(mapped, 4), LdgPartitioner().assign(ref, 4))


# ---- every loader that streams: the same processed folder both ways ----------------------------

def _whole_and_bounded(make, monkeypatch, norm: str = "none") -> tuple[str, str]:
    """The checksum of ``make()``'s graph built in memory (no stage: every source read whole)
    and of its processed folder built under a budget of a few thousand edges a bucket."""
    from gnnscale.data.base import normalize_features

    ds = make("whole")
    ds.feature_norm = norm
    whole = processed.checksum(normalize_features(ds.process(), norm))
    monkeypatch.setattr(bounded, "CHUNK_BYTES", 4096)  # many feature and edge chunks
    ds = make("bounded")
    ds.feature_norm, ds.memory_budget = norm, 600_000  # below the 16MiB floor: many buckets
    built = []
    csc = bounded.external_csc
    monkeypatch.setattr(bounded, "external_csc", lambda *a, **k: built.append(1) or csc(*a, **k))
    monkeypatch.setattr(bounded.EdgeSource, "whole", lambda self: pytest.fail("read whole"))
    ds.load()
    assert built  # the CSC was built out of core from the edge source
    got = processed.load(ds.processed_dir)
    assert not list(ds.processed_dir.parent.parent.glob("*/.staging*"))
    return whole, processed.checksum(got)


def test_ogb_csv_and_binary_layouts_stream_to_the_same_folder(tmp_path, monkeypatch):
    from gnnscale.data.ogb import OgbNodeDataset

    rng = np.random.default_rng(2)
    n, e = 1500, 12_000
    edges, x = rng.integers(0, n, (e, 2)), rng.random((n, 6)).astype(np.float32)
    y = rng.integers(0, 5, n).astype(float)
    y[:7] = np.nan
    for name, folder, binary in (("products", "ogbn_products", False),
                                 ("papers100m", "ogbn_papers100M", True)):
        raw = tmp_path / folder / "raw"
        raw.mkdir(parents=True)
        if binary:
            np.savez(raw / "data.npz", edge_index=edges.T.copy(), node_feat=x,
                     num_nodes_list=np.array([n]))
            np.savez(raw / "node-label.npz", node_label=y[:, None])
        else:
            np.savetxt(raw / "edge.csv.gz", edges, fmt="%d", delimiter=",")
            np.savetxt(raw / "node-feat.csv.gz", x, fmt="%.7g", delimiter=",")
            np.savetxt(raw / "node-label.csv.gz", np.nan_to_num(y, nan=0)[:, None], fmt="%d")
            np.savetxt(raw / "num-node-list.csv.gz", [n], fmt="%d")
        split = tmp_path / folder / "split" / ("time" if binary else "sales_ranking")
        split.mkdir(parents=True)
        for s, idx in (("train", range(10, 500)), ("valid", range(500, 700)),
                       ("test", range(700, 900))):
            np.savetxt(split / f"{s}.csv.gz", list(idx), fmt="%d")
        whole, got = _whole_and_bounded(
            lambda r, name=name, raw=raw: OgbNodeDataset(tmp_path / r, name, raw_dir=str(raw)),
            monkeypatch, "row" if binary else "none")
        assert whole == got, name
        monkeypatch.undo()


@pytest.mark.parametrize("one_width", [True, False])
def test_typed_npz_streams_to_the_same_folder(tmp_path, monkeypatch, one_width):
    rng = np.random.default_rng(3)
    a = {"x__paper": rng.random((900, 5), dtype=np.float32),
         "x__author": rng.random((700, 5 if one_width else 3)),  # float64: converted
         "y__paper": rng.integers(0, 4, 900),
         "edge_index__author__writes__paper": np.stack([rng.integers(0, 700, 6000),
                                                        rng.integers(0, 900, 6000)]),
         "edge_weight__author__writes__paper": rng.random(6000).astype(np.float32),
         "edge_index__paper__cites__paper": rng.integers(0, 900, (2, 5000))}
    if not one_width:
        a["num_nodes__venue"] = np.array(40)
        a["edge_index__paper__in__venue"] = np.stack([rng.integers(0, 900, 900),
                                                      rng.integers(0, 40, 900)])
    np.savez_compressed(tmp_path / "t.npz", **a)  # compressed members: read through zlib
    whole, got = _whole_and_bounded(
        lambda r: CustomDataset(root=str(tmp_path / r), path=str(tmp_path / "t.npz")),
        monkeypatch)
    assert whole == got


def test_custom_npz_edges_stream_from_stored_and_compressed_members(tmp_path, monkeypatch):
    rng = np.random.default_rng(4)
    x, ei = rng.random((1200, 7)), rng.integers(0, 1200, (2, 9000)).astype(np.int32)
    np.savez(tmp_path / "s.npz", x=x, edge_index=np.asfortranarray(ei),  # pairs interleaved
             y=rng.integers(0, 3, 1200), edge_weight=rng.random(9000))
    np.savez_compressed(tmp_path / "c.npz", x=x, edge_index=ei, y=rng.integers(0, 3, 1200))
    for f in ("s.npz", "c.npz"):
        whole, got = _whole_and_bounded(
            lambda r, f=f: CustomDataset(root=str(tmp_path / r), path=str(tmp_path / f)),
            monkeypatch)
        assert whole == got, f
        monkeypatch.undo()


def test_a_source_read_whole_beyond_the_budget_is_refused_in_one_line(tmp_path):
    torch.save({"edge_index": torch.randint(0, 10, (2, 1_100_000)), "num_nodes": 10},
               tmp_path / "g.pt")
    with pytest.raises(ConfigError, match=r"read whole .* more than dataset.memory_budget=16 "
                                          r"MiB; torch.load reads .* save its arrays with "
                                          r"np.savez") as err:
        CustomDataset(root=str(tmp_path), path=str(tmp_path / "g.pt"),
                      memory_budget="16MiB").load()
    assert "\n" not in str(err.value) and not list(tmp_path.glob("custom-*"))


def test_a_budget_too_small_for_one_feature_row_is_one_line(tmp_path):
    stage = bounded.Stage(tmp_path, memory_budget=16 << 20)
    with pytest.raises(ConfigError, match=r"too small to process x: one row of its 300,000 "
                                          r"features takes 4,800,000 bytes") as err:
        stage.features(iter([]), 1, 300_000)
    assert "\n" not in str(err.value)


def test_released_pages_of_a_mapped_file_leave_rss_and_read_back_unchanged(tmp_path):
    """The chunked checks give a mapped file's pages back (RSS drops by them), the values read
    back the same, and a tensor that is no registered mapping is left alone."""
    from gnnscale.data import pages

    def file_rss() -> int:
        return int([ln for ln in open("/proc/self/status") if ln.startswith("RssFile")][0]
                   .split()[1]) * 1024
    ref = np.arange(2 << 20, dtype=np.int64)  # 16 MiB
    np.save(tmp_path / "a.npy", ref)
    array = np.load(tmp_path / "a.npy", mmap_mode="c")
    t = torch.from_numpy(array)
    with pages.releasing([(t, array)]):
        assert int(t.sum()) == int(ref.sum())  # every page touched
        before = file_rss()
        pages.release(t, 0, t.numel() // 2)
        assert before - file_rss() >= 6 << 20
        assert torch.equal(t, torch.from_numpy(ref))  # read again from the page cache
    plain = torch.from_numpy(ref.copy())
    pages.release(plain)  # not registered: untouched
    assert torch.equal(plain, torch.from_numpy(ref))
