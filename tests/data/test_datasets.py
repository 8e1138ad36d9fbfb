"""Dataset loaders: synthetic generator, real graphs (shared copies), OGB layout, custom files."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnscale import registry
from gnnscale.data import processed
from gnnscale.data.convert import (
    DatasetNotFoundError,
    component_labels,
    induced_subgraph,
    largest_component,
)
from gnnscale.data.custom import CustomDataset
from gnnscale.data.graph import GraphStore
from gnnscale.data.heterophilous import HeterophilousDataset
from gnnscale.data.npz import NpzDataset
from gnnscale.data.ogb import OgbNodeDataset
from gnnscale.data.planetoid import PlanetoidDataset
from gnnscale.data.synthetic import SyntheticDataset, communities, generate, resolve
from tests._store_fns import mapped_file
from tests._tables import write_tables

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.fixture
def no_shared(monkeypatch, tmp_path):
    """Hide the shared datasets folder so that only the given locations are searched."""
    monkeypatch.setenv("GNNSCALE_SHARED_DATASETS", str(tmp_path / "no-shared"))


def assert_well_formed(g: GraphStore, undirected: bool = True) -> None:
    assert g.indptr.dtype == torch.int64 and g.indices.dtype == torch.int64
    assert g.x.dtype == torch.float32 and g.y.dtype == torch.int64
    assert g.num_classes == int(g.y.max()) + 1
    splits = [g.train_idx, g.val_idx, g.test_idx]
    for idx in splits:
        assert idx.dtype == torch.int64 and idx.numel() > 0
        assert int(idx.min()) >= 0 and int(idx.max()) < g.num_nodes
    allidx = torch.cat(splits)
    assert allidx.unique().numel() == allidx.numel(), "splits overlap"
    if undirected:
        ei = g.edge_index()
        fwd = ei[0] * g.num_nodes + ei[1]
        rev = ei[1] * g.num_nodes + ei[0]
        assert torch.equal(torch.sort(fwd).values, torch.sort(rev).values), "not symmetric"


def intra_fraction(g: GraphStore, comm: np.ndarray) -> float:
    ei = g.edge_index().numpy()
    return float((comm[ei[0]] == comm[ei[1]]).mean())


def nearest_centroid_accuracy(g: GraphStore, feat: torch.Tensor) -> float:
    tr, te = g.train_idx, g.test_idx
    cent = torch.zeros(g.num_classes, feat.shape[1]).index_add_(0, g.y[tr], feat[tr])
    cent /= torch.bincount(g.y[tr], minlength=g.num_classes).clamp(min=1)[:, None]
    return float((torch.cdist(feat[te], cent).argmin(1) == g.y[te]).float().mean())


# ---- synthetic --------------------------------------------------------------------------------

def test_synthetic_is_deterministic_for_a_seed(tiny_graph):
    again = generate("tiny", seed=0)
    assert processed.checksum(again) == processed.checksum(tiny_graph)
    other = generate("tiny", seed=1)
    assert processed.checksum(other) != processed.checksum(tiny_graph)
    assert np.array_equal(communities("tiny", seed=0), communities("tiny", seed=0))


def test_synthetic_streamed_is_the_same_graph_for_any_chunking(tmp_path):
    """Generation into a stage (features in row chunks, edges deduplicated in key buckets on
    disk and the CSC built out of core) gives the in-memory graph, whatever the budget."""
    from gnnscale.data.bounded import Stage
    from gnnscale.data.synthetic import _KeyBuckets, generate_params

    p = resolve("small", 0.1)
    ref = generate("small", 0.1, seed=3)
    for budget in (520_000, 1 << 21):
        assert _KeyBuckets(tmp_path / "kb", p.num_nodes, p.num_undirected_edges,
                           budget).bounds.size > 1  # several buckets at this budget
        folder = tmp_path / str(budget)
        folder.mkdir()
        got = generate_params(p, 3, stage=Stage(folder, "none", budget))
        for k in ("indptr", "indices", "x", "y", "train_idx", "val_idx", "test_idx"):
            assert torch.equal(getattr(got, k), getattr(ref, k)), (budget, k)
        assert mapped_file(got.x.data_ptr()) is not None  # written to the stage, not held in memory
    assert not (tmp_path / "520000" / "synthetic_keys").exists()  # key buckets removed


def test_synthetic_tiny_shape_and_split(tiny_graph):
    g = tiny_graph
    p = resolve("tiny")
    assert g.num_nodes == p.num_nodes and g.num_edges == 2 * p.num_undirected_edges
    assert g.num_features == p.num_features and g.num_classes == p.num_classes
    assert_well_formed(g)
    assert (g.indptr[1:] - g.indptr[:-1]).sum() == g.num_edges
    assert not bool((g.edge_index()[0] == g.edge_index()[1]).any()), "self-loops"
    assert g.train_idx.numel() == round(p.train_ratio * p.num_nodes)
    assert g.train_idx.numel() + g.val_idx.numel() + g.test_idx.numel() == g.num_nodes


def test_synthetic_communities_are_local(tiny_graph):
    import pymetis

    comm = communities("tiny", seed=0)
    assert len(np.unique(comm)) == resolve("tiny").num_communities
    assert intra_fraction(tiny_graph, comm) > 0.85
    # shuffled ids: a community is not a contiguous id range
    assert np.mean(comm[1:] == comm[:-1]) < 0.2
    _, parts = pymetis.part_graph(4, xadj=tiny_graph.indptr.numpy(),
                                  adjncy=tiny_graph.indices.numpy())
    parts = np.asarray(parts)
    assert intra_fraction(tiny_graph, parts) >= 0.9


def test_synthetic_degrees_are_heavy_tailed(tiny_graph):
    deg = tiny_graph.in_degree().double()
    assert deg.max() >= 6 * deg.mean()
    assert deg.median() < deg.mean()  # right-skewed
    top = torch.sort(deg, descending=True).values
    assert top[: len(top) // 10].sum() > 0.25 * deg.sum()  # top 10% hold > 25% of edge ends


def test_synthetic_labels_are_predictable_and_neighbors_help(tiny_graph):
    g = tiny_graph
    chance = 1.0 / g.num_classes
    dst = torch.repeat_interleave(torch.arange(g.num_nodes), g.in_degree())
    mean = torch.zeros_like(g.x).index_add_(0, dst, g.x[g.indices])
    mean /= g.in_degree().clamp(min=1)[:, None].float()
    own = nearest_centroid_accuracy(g, g.x)
    agg = nearest_centroid_accuracy(g, mean)
    assert own > 2 * chance
    assert agg > 5 * chance and agg > own + 0.2


def test_synthetic_presets_and_scale():
    full = resolve("products_sim")
    assert (full.num_nodes, full.num_undirected_edges) == (2_449_029, 61_859_140)
    assert (full.num_features, full.num_classes) == (100, 47)
    tenth = resolve("products_sim", 0.1)
    assert tenth.num_nodes == 244_903 and abs(tenth.num_undirected_edges - 6_185_914) <= 10
    small = resolve("small")
    assert small.num_nodes == 50_000 and 100_000 < small.num_undirected_edges < 1_000_000
    g = generate("products_sim", scale=0.002, seed=3)
    p = resolve("products_sim", 0.002)
    assert g.num_nodes == p.num_nodes and g.num_edges == 2 * p.num_undirected_edges
    assert g.num_features == 100 and g.num_classes == 47
    assert abs(g.train_idx.numel() / g.num_nodes - 0.0803) < 0.01
    assert abs(g.val_idx.numel() / g.num_nodes - 0.0161) < 0.005


def test_synthetic_overrides_and_errors():
    g = generate("tiny", num_nodes=500, num_classes=3, num_communities=10, avg_degree=6.0)
    assert g.num_nodes == 500 and g.num_classes == 3 and g.num_edges == 3000
    assert resolve("tiny", p_intra=None) == resolve("tiny")  # None = the preset's value
    with pytest.raises(ValueError, match="unknown synthetic preset"):
        resolve("huge")
    with pytest.raises(ValueError, match="unknown synthetic options"):
        resolve("tiny", num_nodez=3)
    with pytest.raises(ValueError, match="scale must be positive"):
        resolve("tiny", scale=0)
    with pytest.raises(ValueError, match="too dense"):
        resolve("tiny", num_nodes=10, num_communities=2, avg_degree=8.0)


def test_synthetic_dataset_caches_by_parameters(tmp_path, tiny_graph):
    ds = SyntheticDataset(tmp_path, preset="tiny", seed=0)
    g = ds.load()
    assert processed.checksum(g) == processed.checksum(tiny_graph)
    assert mapped_file(g.x.data_ptr()) is not None
    assert ds.processed_dir.is_dir() and ds.load().meta["checksum"] == g.meta["checksum"]
    assert SyntheticDataset(tmp_path, preset="tiny", p_intra=0.5).key != ds.key
    assert SyntheticDataset(tmp_path, preset="tiny", seed=1).key != ds.key


# ---- configs ----------------------------------------------------------------------------------

def test_every_dataset_config_composes_and_builds(tmp_path):
    from hydra import compose, initialize_config_dir

    from gnnscale.data.entities import EntitiesDataset
    from gnnscale.data.hetero_sim import HeteroSimDataset
    from gnnscale.data.hgb import HgbDataset
    from gnnscale.data.magnn import MagnnDataset
    from gnnscale.data.ogb_mag import OgbMagDataset
    from gnnscale.data.ogbl import OgbLinkDataset
    from gnnscale.data.saved import SavedDataset
    from gnnscale.data.tables import TablesDataset

    for module in ("synthetic", "planetoid", "npz", "heterophilous", "ogb", "custom",
                   "ogbl", "saved"):
        __import__(f"gnnscale.data.{module}")
    user_file = tmp_path / "g.npz"
    np.savez(user_file, edge_index=np.array([[0], [1]]))
    expected = {"synthetic": SyntheticDataset, "products_sim": SyntheticDataset,
                **dict.fromkeys(("products_like", "papers_like", "reddit_like", "web_like"),
                                SyntheticDataset),
                "cora": PlanetoidDataset, "citeseer": PlanetoidDataset,
                "pubmed": PlanetoidDataset, "computers": NpzDataset, "photo": NpzDataset,
                "cs": NpzDataset, "physics": NpzDataset, "tolokers": HeterophilousDataset,
                "arxiv": OgbNodeDataset, "products": OgbNodeDataset,
                "papers100m": OgbNodeDataset, "custom": CustomDataset, "saved": SavedDataset,
                "tables": TablesDataset,
                **dict.fromkeys(("collab", "ppa", "ddi", "citation2"), OgbLinkDataset),
                "dblp": MagnnDataset, "imdb": MagnnDataset, "acm": HgbDataset,
                "aifb": EntitiesDataset, "mutag": EntitiesDataset, "ogbn_mag": OgbMagDataset,
                "hetero_sim": HeteroSimDataset}
    options = sorted(p.stem for p in (CONFIGS / "dataset").glob("*.yaml"))
    assert set(expected) <= set(options)
    with initialize_config_dir(str(CONFIGS), version_base=None):
        for option in options:
            overrides = [f"+dataset={option}", f"+data_root={tmp_path}"]
            if option == "custom":
                overrides.append(f"dataset.path={user_file}")
            if option == "saved":
                overrides.append(f"dataset.path={tmp_path / 'saved'}")
            if option == "tables":
                overrides.append(f"dataset.schema={write_tables(tmp_path / 'tables')}")
            ds = registry.build(compose(overrides=overrides).dataset)
            assert isinstance(ds, expected[option]), option
            assert ds.root == tmp_path
        products = registry.build(compose(overrides=[
            "+dataset=products_sim", f"+data_root={tmp_path}", "dataset.scale=0.1"]).dataset)
        assert products.params.num_nodes == 244_903
        with pytest.raises(Exception, match="nme"):
            compose(overrides=["+dataset=cora", f"+data_root={tmp_path}", "dataset.nme=x"])


# ---- real graphs from the shared copies --------------------------------------------------------

# option -> (folder to copy, constructor, nodes, directed edges, features, classes)
REAL = {
    "cora": ("planetoid", lambda r: PlanetoidDataset(r, "cora"), 2708, 10556, 1433, 7),
    "citeseer": ("planetoid", lambda r: PlanetoidDataset(r, "citeseer"), 3327, 9104, 3703, 6),
    "pubmed": ("planetoid", lambda r: PlanetoidDataset(r, "pubmed"), 19717, 88648, 500, 3),
    "computers": ("npz", lambda r: NpzDataset(r, "computers"), 13752, 491722, 767, 10),
    "photo": ("npz", lambda r: NpzDataset(r, "photo"), 7650, 238162, 745, 8),
    "cs": ("npz", lambda r: NpzDataset(r, "cs"), 18333, 163788, 6805, 15),
    "physics": ("npz", lambda r: NpzDataset(r, "physics"), 34493, 495924, 8415, 5),
    "tolokers": ("heterophilous", lambda r: HeterophilousDataset(r, "tolokers"),
                 11758, 1038000, 10, 2),
}
# every processed array (CSC graph, features, labels, split) as PyG's Planetoid, Amazon, Coauthor
# and HeterophilousGraphDataset build it from the same files (recorded with PyG 2.8.1): SHA-256
# of the arrays' digests in meta.json, in name order
PYG_DIGESTS = {
    "cora": "97331f67077898e25abd8b6c0544d5de",
    "citeseer": "95675691fd8676d7438ad637fa88300e",
    "pubmed": "25aef0c1bb5122d686b863b22e3c5e63",
    "photo": "6435cf4ebceeb8cf012eec93aeda8615",
    "computers": "cf256ea3464025ce415de9c94c62ee90",
    "tolokers": "b52d2b29084f59b7f770aa2a50e42599",
    "cs": "e4ed1a4cf3f6f2b61fa854ccbb166330",
    "physics": "ae9a904fd2a8a2617aec0e5ab52be43f",
}
PUBLIC_SPLITS = {"cora": (140, 500, 1000), "citeseer": (120, 500, 1000),
                 "pubmed": (60, 500, 1000)}
# the two largest dense feature matrices (0.5 and 1.2 GB) take long: marked slow
SLOW = {"cs", "physics"}


@pytest.mark.parametrize("option", [
    pytest.param(o, marks=pytest.mark.slow) if o in SLOW else o for o in REAL
])
def test_real_loader_on_shared_copy(option, shared_datasets, tmp_path):
    folder, make, nodes, edges, features, classes = REAL[option]
    shared_datasets(folder)  # copied to tmp_path/<folder>, found through the default layout
    ds = make(tmp_path)
    g = ds.load()
    arrays = json.loads((ds.processed_dir / "meta.json").read_text())["arrays"]
    joined = "".join(arrays[name]["sha256"] for name in sorted(arrays))
    assert hashlib.sha256(joined.encode()).hexdigest()[:32] == PYG_DIGESTS[option]
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (
        nodes, edges, features, classes)
    assert_well_formed(g)
    sizes = (g.train_idx.numel(), g.val_idx.numel(), g.test_idx.numel())
    if option in PUBLIC_SPLITS:
        assert sizes == PUBLIC_SPLITS[option]
    elif folder == "npz":
        per_class = torch.bincount(g.y[g.train_idx], minlength=classes)
        assert int(per_class.max()) == 20 and sizes[1] <= 30 * classes
        assert sum(sizes) == nodes
    assert g.meta["source"].startswith(str(tmp_path / folder))  # the copy, by default layout
    assert not (tmp_path / folder / "processed").exists()


def test_real_loader_reads_explicit_raw_dir_without_writing_there(shared_datasets, tmp_path):
    raw = shared_datasets("planetoid") / "Cora" / "raw"
    raw.chmod(0o555)  # read-only like the shared copy: processing must not write here
    try:
        g = PlanetoidDataset(tmp_path / "data", "Cora", raw_dir=str(raw)).load()
    finally:
        raw.chmod(0o755)
    assert g.num_nodes == 2708 and sorted(p.name for p in raw.iterdir())[0] == "ind.cora.allx"
    assert len(list(raw.iterdir())) == 8


@pytest.mark.timeout(30)
@pytest.mark.parametrize("make, expected", [
    (lambda r: PlanetoidDataset(r, "cora"), "ind.cora.x"),
    (lambda r: NpzDataset(r, "photo"), "amazon_electronics_photo.npz"),
    (lambda r: NpzDataset(r, "physics"), "ms_academic_phy.npz"),
    (lambda r: HeterophilousDataset(r, "tolokers"), "tolokers.npz"),
    (lambda r: OgbNodeDataset(r, "products"), "node-label.csv.gz"),
    (lambda r: OgbNodeDataset(r, "papers100m"), "data.npz"),
])
def test_missing_raw_files_raise_clear_error_without_download(make, expected, tmp_path,
                                                              no_shared):
    with pytest.raises(DatasetNotFoundError) as err:
        make(tmp_path).load()
    msg = str(err.value)
    assert expected in msg and str(tmp_path) in msg and "shared/datasets" in msg
    assert "no download" in msg
    assert isinstance(err.value, FileNotFoundError)


# ---- OGB raw layout ---------------------------------------------------------------------------

def write_ogb_csv(folder: Path, n: int = 30, f: int = 4, classes: int = 3) -> dict:
    """A small graph in OGB's csv layout (one row per undirected edge, like ogbn-products)."""
    rng = np.random.default_rng(0)
    edges = np.array([[i, (i + 1) % n] for i in range(n)] + [[0, 5], [3, 9]])
    x = rng.standard_normal((n, f)).astype(np.float32)
    y = rng.integers(0, classes, n)
    raw = folder / "raw"
    raw.mkdir(parents=True)
    np.savetxt(raw / "edge.csv.gz", edges, fmt="%d", delimiter=",")
    np.savetxt(raw / "node-feat.csv.gz", x, fmt="%.6f", delimiter=",")
    np.savetxt(raw / "node-label.csv.gz", y[:, None], fmt="%d")
    np.savetxt(raw / "num-node-list.csv.gz", [n], fmt="%d")
    np.savetxt(raw / "num-edge-list.csv.gz", [len(edges)], fmt="%d")
    split = folder / "split" / "sales_ranking"
    split.mkdir(parents=True)
    perm = rng.permutation(n)
    parts = {"train": perm[:10], "valid": perm[10:15], "test": perm[15:]}
    for name, idx in parts.items():
        np.savetxt(split / f"{name}.csv.gz", idx, fmt="%d")
    return {"edges": edges, "x": x, "y": y, "split": parts}


def test_ogb_csv_layout(tmp_path, no_shared):
    ref = write_ogb_csv(tmp_path / "ogbn_products")
    g = OgbNodeDataset(tmp_path, "ogbn-products").load()
    assert g.name == "ogbn-products" and g.num_classes == 47
    assert g.num_nodes == 30 and g.num_edges == 2 * len(ref["edges"])
    assert set(zip(*g.edge_index().tolist())) == {
        e for u, v in ref["edges"].tolist() for e in ((u, v), (v, u))}
    assert torch.allclose(g.x, torch.from_numpy(ref["x"]), atol=1e-6)
    assert torch.equal(g.y, torch.from_numpy(ref["y"]))
    assert g.train_idx.tolist() == sorted(ref["split"]["train"].tolist())
    assert g.val_idx.tolist() == sorted(ref["split"]["valid"].tolist())
    assert g.test_idx.tolist() == sorted(ref["split"]["test"].tolist())


def test_ogb_csv_layout_directed_and_explicit_raw_dir(tmp_path, no_shared):
    ref = write_ogb_csv(tmp_path / "elsewhere" / "arxiv")
    (tmp_path / "elsewhere" / "arxiv" / "split" / "sales_ranking").rename(
        tmp_path / "elsewhere" / "arxiv" / "split" / "time")
    ds = OgbNodeDataset(tmp_path / "data", "arxiv", raw_dir=str(tmp_path / "elsewhere" / "arxiv"
                                                               / "raw"), symmetrize=False)
    g = ds.load()
    assert g.num_edges == len(ref["edges"]) and ds.key == "ogbn-arxiv-directed"
    assert set(zip(*g.edge_index().tolist())) == set(map(tuple, ref["edges"].tolist()))


def test_ogb_binary_layout_with_unlabelled_nodes(tmp_path, no_shared):
    n = 12
    folder = tmp_path / "ogbn_papers100M"
    (folder / "raw").mkdir(parents=True)
    edge_index = np.array([[0, 1, 2, 3, 4], [1, 2, 3, 4, 0]])
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    label = np.full(n, np.nan)
    label[:6] = [0, 1, 2, 3, 4, 5]
    np.savez(folder / "raw" / "data.npz", edge_index=edge_index, node_feat=x,
             num_nodes_list=np.array([n]), num_edges_list=np.array([5]))
    np.savez(folder / "raw" / "node-label.npz", node_label=label[:, None])
    split = folder / "split" / "time"
    split.mkdir(parents=True)
    for name, idx in {"train": [0, 1, 2], "valid": [3], "test": [4, 5]}.items():
        np.savetxt(split / f"{name}.csv.gz", idx, fmt="%d")
    g = OgbNodeDataset(tmp_path, "papers100M").load()
    assert g.num_nodes == n and g.num_edges == 10 and g.num_classes == 172
    assert g.y[:6].tolist() == [0, 1, 2, 3, 4, 5] and (g.y[6:] == -1).all()
    assert torch.equal(g.x, torch.from_numpy(x))
    assert g.train_idx.tolist() == [0, 1, 2] and g.test_idx.tolist() == [4, 5]


def test_ogb_missing_split_and_bad_rows_raise(tmp_path, no_shared):
    write_ogb_csv(tmp_path / "ogbn_products")
    for f in (tmp_path / "ogbn_products" / "split" / "sales_ranking").iterdir():
        f.unlink()
    with pytest.raises(DatasetNotFoundError, match="valid.csv.gz"):
        OgbNodeDataset(tmp_path, "products").load()
    bad = tmp_path / "b"
    write_ogb_csv(bad / "ogbn_products")
    np.savetxt(bad / "ogbn_products" / "raw" / "num-node-list.csv.gz", [31], fmt="%d")
    with pytest.raises(ValueError, match="30 rows for 31 nodes"):
        OgbNodeDataset(bad, "products").load()
    with pytest.raises(ValueError, match="unknown OGB node dataset"):
        OgbNodeDataset(tmp_path, "mag")


# ---- custom files -----------------------------------------------------------------------------

def test_custom_npz_round_trip_with_masks(tmp_path, tiny_graph):
    g0 = tiny_graph
    ei = g0.edge_index().numpy()
    path = tmp_path / "mine.npz"
    np.savez(path, edge_index=ei, x=g0.x.numpy(), y=g0.y.numpy(),
             train_mask=g0.mask("train").numpy(), val_mask=g0.mask("val").numpy(),
             test_mask=g0.mask("test").numpy())
    g = CustomDataset(tmp_path / "data", path=str(path)).load()
    for name in ("indptr", "indices", "x", "y", "train_idx", "val_idx", "test_idx"):
        assert torch.equal(getattr(g, name), getattr(g0, name)), name
    assert g.num_classes == g0.num_classes and g.name == "mine"


def test_custom_torch_saved_data_round_trip(tmp_path):
    from torch_geometric.data import Data

    data = Data(edge_index=torch.tensor([[0, 1, 2], [1, 2, 3]]), x=torch.randn(5, 3),
                y=torch.tensor([0, 1, 0, 1, 2]), train_idx=torch.tensor([0, 1]),
                val_idx=torch.tensor([2]), test_idx=torch.tensor([3, 4]))
    torch.save(data, tmp_path / "g.pt")
    g = CustomDataset(tmp_path, path=str(tmp_path / "g.pt"), symmetrize=False).load()
    assert g.num_nodes == 5 and g.num_classes == 3 and g.num_edges == 3
    assert set(zip(*g.edge_index().tolist())) == {(0, 1), (1, 2), (2, 3)}
    assert torch.equal(g.x, data.x) and torch.equal(g.y, data.y)
    assert g.train_idx.tolist() == [0, 1] and g.test_idx.tolist() == [3, 4]


def test_custom_without_split_gets_seeded_ratio_split(tmp_path):
    n = 50
    y = np.arange(n) % 4
    y[-5:] = -1  # unlabelled
    np.savez(tmp_path / "g.npz", edge_index=np.stack([np.arange(n - 1), np.arange(1, n)]),
             x=np.ones((n, 2), dtype=np.float64), y=y)
    a = CustomDataset(tmp_path / "a", path=str(tmp_path / "g.npz")).load()
    b = CustomDataset(tmp_path / "b", path=str(tmp_path / "g.npz")).load()
    assert torch.equal(a.train_idx, b.train_idx) and a.x.dtype == torch.float32
    assert (a.train_idx.numel(), a.val_idx.numel(), a.test_idx.numel()) == (27, 9, 9)
    assert (a.y[torch.cat([a.train_idx, a.val_idx, a.test_idx])] >= 0).all()
    assert a.num_edges == 2 * (n - 1)


def test_custom_bad_files_raise_clear_errors(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="torch.save"):
        CustomDataset(tmp_path, path=str(tmp_path / "missing.npz"))
    with pytest.raises(ValueError, match="dataset.path"):
        CustomDataset(tmp_path, path=None)
    np.savez(tmp_path / "noedges.npz", x=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="no 'edge_index'"):
        CustomDataset(tmp_path, path=str(tmp_path / "noedges.npz")).load()
    np.savez(tmp_path / "shape.npz", edge_index=np.zeros((3, 4), dtype=np.int64))
    with pytest.raises(ValueError, match=r"shape \[2, E\]"):
        CustomDataset(tmp_path, path=str(tmp_path / "shape.npz")).load()
    np.savez(tmp_path / "range.npz", edge_index=np.array([[0, 7], [1, 2]]), y=np.zeros(3))
    with pytest.raises(ValueError, match=r"range.npz: .*num_nodes = 3"):
        CustomDataset(tmp_path, path=str(tmp_path / "range.npz")).load()
    (tmp_path / "junk.pt").write_bytes(b"not a graph")
    with pytest.raises(ValueError, match="cannot read it"):
        CustomDataset(tmp_path, path=str(tmp_path / "junk.pt")).load()


# ---- Shchur et al.'s standardisation: the largest connected component ------------------------

def _bfs_components(edges: torch.Tensor, n: int) -> list[set[int]]:
    """Reference: breadth-first search over the undirected edges."""
    adj: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges.t().tolist():
        adj[u].append(v)
        adj[v].append(u)
    seen, comps = set(), []
    for s in range(n):
        if s in seen:
            continue
        comp, frontier = {s}, [s]
        while frontier:
            frontier = [w for u in frontier for w in adj[u] if w not in comp and not comp.add(w)]
        seen |= comp
        comps.append(comp)
    return comps


@pytest.mark.parametrize("seed", range(4))
def test_component_labels_match_breadth_first_search(seed):
    g = torch.Generator().manual_seed(seed)
    n = 300
    edges = torch.randint(0, n, (2, 260), generator=g)  # sparse: many components, long chains
    edges = torch.cat([edges, torch.stack([torch.arange(50, 120), torch.arange(51, 121)])], 1)
    label = component_labels(edges, n)
    comps = _bfs_components(edges, n)
    assert sorted(int(label[list(c)[0]]) for c in comps) == sorted(min(c) for c in comps)
    assert all(len({int(label[v]) for v in c}) == 1 for c in comps)
    biggest = max(comps, key=lambda c: (len(c), -min(c)))
    keep = largest_component(edges, n)
    assert keep.tolist() == sorted(biggest)
    sub = induced_subgraph(edges, n, keep)
    inside = [(u, v) for u, v in edges.t().tolist() if u in biggest]
    assert sub.shape[1] == len(inside) and int(sub.max()) < keep.numel()


@pytest.mark.parametrize("name, nodes, edges", [("photo", 7487, 238086),
                                                ("computers", 13381, 491556)])
def test_largest_component_gives_shchurs_graph_sizes(name, nodes, edges, shared_datasets,
                                                     tmp_path):
    """Shchur et al. (2018), Table 1: Photo 7,487 vertices / 119,043 edges, Computers 13,381 /
    245,778, once reduced to the largest component (directed edges here: twice)."""
    shared_datasets("npz")
    ds = NpzDataset(tmp_path, name, largest_component=True)
    g = ds.load()
    assert (g.num_nodes, g.num_edges) == (nodes, edges)
    assert g.meta["largest_component"] is True and "-lcc-" in str(ds.processed_dir)
    assert int(component_labels(g.edge_index(), nodes).max()) == 0
    assert sum(t.numel() for t in (g.train_idx, g.val_idx, g.test_idx)) == nodes
