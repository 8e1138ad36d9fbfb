"""Typed datasets: the generated hetero_sim graph, typed custom input (.npz layout and PyG
HeteroData), OGB's ogbn-mag layout, one-line errors for bad typed input, and the readers of the
shared typed datasets against the counts in ../shared/datasets/hetero/README.md."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from gnnscale.data import processed
from gnnscale.data.convert import DatasetNotFoundError
from gnnscale.data.custom import CustomDataset
from gnnscale.data.entities import EntitiesDataset, read_ntriples
from gnnscale.data.hetero_sim import HeteroSimDataset, generate
from gnnscale.data.hgb import HgbDataset
from gnnscale.data.magnn import MagnnDataset
from gnnscale.data.ogb_mag import OgbMagDataset
from gnnscale.data.schemas import HeteroSimConfig
from gnnscale.errors import ConfigError
from tests.conftest import shared_datasets_root

WRITES = ("author", "writes", "paper")
CITES = ("paper", "cites", "paper")


@pytest.fixture(scope="module")
def sim():
    return generate(HeteroSimConfig(scale=0.01, seed=0))


# ---- hetero_sim -------------------------------------------------------------------------------

def test_hetero_sim_schema_counts_and_edge_features(sim):
    assert sim.node_types == ("paper", "author", "institution", "field_of_study")
    assert sim.node_type_offset.diff().tolist() == [7364, 11346, 87, 600]
    assert sim.feature_dims == {"paper": 128, "author": 0, "institution": 0,
                                "field_of_study": 0}
    assert sim.x is None and sim.target_types == ("paper",) and sim.num_classes == 35
    assert len(sim.edge_types) == 8 and ("paper", "rev_writes", "author") in sim.edge_types
    dims = sim.edge_feature_dims
    assert dims[WRITES] == dims[("paper", "rev_writes", "author")] == 2
    assert dims[CITES] == 1 and dims[("author", "affiliated_with", "institution")] == 0
    # a reverse type carries its forward type's features: same multiset of rows
    fwd, rev = sim.edge_attrs[WRITES], sim.edge_attrs[("paper", "rev_writes", "author")]
    assert torch.equal(fwd.sum(0), rev.sum(0)) and fwd.shape == rev.shape
    # the split: year-based, on papers only, disjoint, ~85% train
    lo, hi = sim.node_type_offset[:2].tolist()
    ids = torch.cat([sim.train_idx, sim.val_idx, sim.test_idx])
    assert ids.unique().numel() == ids.numel() == hi - lo and int(ids.min()) >= lo
    assert 0.8 < sim.train_idx.numel() / (hi - lo) < 0.9


def test_hetero_sim_degrees_are_heavy_tailed_and_labels_follow_neighbours(sim):
    ptr, idx, _ = sim.edge_type_csc(CITES)
    cited = ptr.diff().double()
    assert cited.max() > 20 * cited.mean() and cited.median() < cited.mean()
    x = sim.features["paper"]
    y = sim.y[:x.shape[0]]
    tr, te = sim.train_idx, sim.test_idx  # papers come first: global ids are local ids

    def accuracy(f: torch.Tensor) -> float:
        c = torch.zeros(sim.num_classes, f.shape[1]).index_add_(0, y[tr], f[tr])
        c /= torch.bincount(y[tr], minlength=sim.num_classes).clamp(min=1)[:, None]
        return float((torch.cdist(f[te], c).argmin(1) == y[te]).float().mean())

    mean = x.clone()
    count = torch.ones(x.shape[0])
    for et in (CITES, ("paper", "rev_cites", "paper")):
        ptr, idx, _ = sim.edge_type_csc(et)
        dst = torch.repeat_interleave(torch.arange(x.shape[0]), ptr.diff())
        mean.index_add_(0, dst, x[idx.long()])
        count += ptr.diff()
    own, neighbours = accuracy(x), accuracy(mean / count[:, None])
    assert own < 0.7 and neighbours > own + 0.2, (own, neighbours)


def test_hetero_sim_is_deterministic_and_round_trips(sim, tmp_path):
    ds = HeteroSimDataset(tmp_path, scale=0.002, seed=3)
    g = ds.load()
    assert processed.checksum(generate(HeteroSimConfig(scale=0.002, seed=3))) == \
        g.meta["checksum"]
    assert processed.checksum(generate(HeteroSimConfig(scale=0.002, seed=4))) != \
        g.meta["checksum"]
    assert set(g.type_edge_attr) == {WRITES, CITES, ("paper", "rev_writes", "author"),
                                     ("paper", "rev_cites", "paper")}
    assert sorted(p.name for p in ds.processed_dir.glob("edge_attr__*.npy")) == [
        "edge_attr__0.npy", "edge_attr__1.npy", "edge_attr__4.npy", "edge_attr__5.npy"]
    with pytest.raises(ConfigError, match="dataset.scale"):
        HeteroSimConfig(scale=10).check()


# ---- typed custom input -----------------------------------------------------------------------

def typed_arrays() -> dict[str, np.ndarray]:
    """A small typed graph in the .npz layout: paper (features, labels, split), author
    (features of another width), field (featureless), edge features on writes."""
    rng = np.random.default_rng(0)
    return {
        "x__paper": rng.random((6, 4), dtype=np.float32),
        "y__paper": np.array([0, 1, 2, 0, 1, -1]),
        "train_idx__paper": np.array([0, 1, 2]), "val_idx__paper": np.array([3]),
        "test_mask__paper": np.array([0, 0, 0, 0, 1, 0], dtype=bool),
        "x__author": rng.random((4, 2), dtype=np.float32),
        "num_nodes__field": np.array(3),
        "edge_index__author__writes__paper": np.array([[0, 1, 2, 3, 3], [0, 1, 2, 3, 5]]),
        "edge_attr__author__writes__paper": np.arange(10, dtype=np.float32).reshape(5, 2),
        "edge_index__paper__cites__paper": np.array([[0, 1, 4], [1, 2, 0]]),
        "edge_index__paper__has_topic__field": np.array([[0, 2, 5], [0, 1, 2]]),
        "num_classes": np.array(3),
    }


def check_typed(g, order: tuple[str, ...]) -> None:
    assert g.node_types == order
    counts = {"author": 4, "field": 3, "paper": 6}
    assert g.node_type_offset.diff().tolist() == [counts[t] for t in order]
    assert g.feature_dims == {"author": 2, "field": 0, "paper": 4}
    assert g.target_types == ("paper",) and g.num_classes == 3
    assert len(g.edge_types) == 6  # symmetrize: a rev_ type each
    assert g.to_local("paper", g.train_idx).tolist() == [0, 1, 2]
    assert g.to_local("paper", g.test_idx).tolist() == [4]
    attr = g.edge_attrs[WRITES]
    _, idx, _ = g.edge_type_csc(WRITES)
    assert attr.shape == (5, 2) and sorted(attr[:, 0].tolist()) == [0, 2, 4, 6, 8]
    given = torch.tensor([0, 1, 2, 3, 3])  # the sources, in the order the rows were given
    assert torch.equal(given[(attr[:, 0] // 2).long()], idx.long())  # rows went with edges


def test_typed_npz_round_trip(tmp_path):
    np.savez(tmp_path / "typed.npz", **typed_arrays())
    g = CustomDataset(tmp_path / "data", path=str(tmp_path / "typed.npz")).load()
    check_typed(g, ("author", "field", "paper"))  # sorted: no node_types member
    np.savez(tmp_path / "ordered.npz", **typed_arrays(),
             node_types=np.array(["paper", "field", "author"]))
    g = CustomDataset(tmp_path / "data", path=str(tmp_path / "ordered.npz")).load()
    check_typed(g, ("paper", "field", "author"))


def test_hetero_data_round_trip(tmp_path):
    from torch_geometric.data import HeteroData

    a = typed_arrays()
    data = HeteroData()
    data["paper"].x = torch.from_numpy(a["x__paper"])
    data["paper"].y = torch.from_numpy(a["y__paper"])
    data["paper"].train_idx = torch.from_numpy(a["train_idx__paper"])
    data["paper"].val_idx = torch.from_numpy(a["val_idx__paper"])
    data["paper"].test_mask = torch.from_numpy(a["test_mask__paper"])
    data["author"].x = torch.from_numpy(a["x__author"])
    data["field"].num_nodes = 3
    for key, value in a.items():
        if key.startswith("edge_"):
            kind, *et = key.split("__")
            data[tuple(et)][kind] = torch.from_numpy(value)
    data.num_classes = 3
    torch.save(data, tmp_path / "typed.pt")
    g = CustomDataset(tmp_path / "data", path=str(tmp_path / "typed.pt")).load()
    check_typed(g, ("paper", "author", "field"))  # HeteroData's own order


@pytest.mark.parametrize("change, match", [
    (lambda a: a.update({"edge_index__author__writes__venue": np.array([[0], [0]])}),
     r"edge type \('author', 'writes', 'venue'\) names node type 'venue'"),
    (lambda a: a.update({"edge_index__paper__cites__paper": np.array([[0, 6], [1, 2]])}),
     r"source ids in \[0, 6\] but there are 6 'paper' nodes"),
    (lambda a: a.update({"x__author": np.zeros((5, 2), np.float32),
                         "num_nodes__author": np.array(4)}),
     r"x__author has shape \(5, 2\): 4 rows expected"),
    (lambda a: a.update({"train_idx__author": np.array([0])}),
     r"target type 'author' has a train split but no labels"),
    (lambda a: a.update({"edge_attr__author__writes__paper": np.zeros((4, 2), np.float32)}),
     r"edge_attr__author__writes__paper has 4 rows for the 5 edges"),
])
def test_bad_typed_input_is_one_line(tmp_path, change, match):
    a = typed_arrays()
    change(a)
    np.savez(tmp_path / "bad.npz", **a)
    with pytest.raises(ConfigError, match=match) as err:
        CustomDataset(tmp_path / "data", path=str(tmp_path / "bad.npz")).load()
    assert "\n" not in str(err.value) and str(tmp_path / "bad.npz") in str(err.value)


# ---- ogbn-mag layout --------------------------------------------------------------------------

def write_mag(folder: Path) -> None:
    """A tiny ogbn-mag in OGB's raw layout."""
    def csv(path: Path, rows, fmt="%d") -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savetxt(path, np.asarray(rows), fmt=fmt, delimiter=",")

    raw = folder / "raw"
    raw.mkdir(parents=True)
    counts = {"author": 4, "field_of_study": 2, "institution": 2, "paper": 5}
    import gzip
    with gzip.open(raw / "num-node-dict.csv.gz", "wt") as f:
        f.write(",".join(counts) + "\n" + ",".join(map(str, counts.values())) + "\n")
    with gzip.open(raw / "triplet-type-list.csv.gz", "wt") as f:
        f.write("author,affiliated_with,institution\nauthor,writes,paper\npaper,cites,paper\n"
                "paper,has_topic,field_of_study\n")
    rel = raw / "relations"
    csv(rel / "author___affiliated_with___institution" / "edge.csv.gz", [[0, 0], [3, 1]])
    csv(rel / "author___writes___paper" / "edge.csv.gz", [[0, 0], [1, 0], [2, 4]])
    csv(rel / "paper___cites___paper" / "edge.csv.gz", [[1, 0], [2, 1], [4, 3]])
    csv(rel / "paper___has_topic___field_of_study" / "edge.csv.gz", [[0, 0], [3, 1]])
    csv(raw / "node-feat" / "paper" / "node-feat.csv.gz", np.eye(5, 3), "%.1f")
    csv(raw / "node-label" / "paper" / "node-label.csv.gz", [[0], [1], [2], [0], [1]])
    for name, ids in (("train", [0, 1, 2]), ("valid", [3]), ("test", [4])):
        csv(folder / "split" / "time" / "paper" / f"{name}.csv.gz", [[i] for i in ids])


def test_ogbn_mag_layout(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNSCALE_SHARED_DATASETS", str(tmp_path / "no-shared"))
    with pytest.raises(DatasetNotFoundError, match="no download") as err:
        OgbMagDataset(tmp_path).load()
    assert "num-node-dict.csv.gz" in str(err.value) and "ogbn_mag/raw" in str(err.value)
    write_mag(tmp_path / "ogbn_mag")
    g = OgbMagDataset(tmp_path).load()
    assert g.node_types == ("author", "field_of_study", "institution", "paper")
    assert g.num_edges_per_type() == [2, 3, 3, 2] * 2 and g.target_types == ("paper",)
    assert g.feature_dims["paper"] == 3 and g.num_classes == 3
    assert g.to_local("paper", g.test_idx).tolist() == [4]


# ---- the shared typed datasets (counts from ../shared/datasets/hetero/README.md) --------------

HETERO = shared_datasets_root() / "hetero"
needs_shared = pytest.mark.skipif(not HETERO.is_dir(), reason=f"{HETERO} is absent (the real "
                                  "typed datasets are never committed)")
# option -> (make, nodes per type, edges per type, feature widths, classes, split sizes)
README = {
    "dblp": (lambda r: MagnnDataset(r, "dblp"),
             {"author": 4057, "paper": 14328, "term": 7723, "conference": 20},
             [19645, 19645, 85810, 14328, 85810, 14328], [334, 4231, 50, 0], 4,
             (400, 400, 3257)),
    "dblp_hgb": (lambda r: MagnnDataset(r, "dblp", split="hgb"), None, None, None, 4,
                 (974, 243, 2840)),
    "imdb": (lambda r: MagnnDataset(r, "imdb"), {"movie": 4278, "director": 2081,
                                                  "actor": 5257},
             [4278, 12828, 4278, 12828], [3066] * 3, 3, (400, 400, 3478)),
    "acm": (lambda r: HgbDataset(r, "acm"),
            {"paper": 3025, "author": 5959, "subject": 56, "term": 1902},
            [5343, 5343, 9949, 9949, 3025, 3025, 255619, 255619], [1902, 1902, 1902, 0], 3,
            (726, 181, 2118)),
    "aifb": (lambda r: EntitiesDataset(r, "aifb"), {"entity": 8285}, 58086, [0], 4,
             (140, 0, 36)),
    "mutag": (lambda r: EntitiesDataset(r, "mutag"), {"entity": 23644}, 148454, [0], 2,
              (272, 0, 68)),
}
SLOW = {"dblp_hgb", "acm", "mutag"}


@needs_shared
@pytest.mark.parametrize("option", [pytest.param(o, marks=pytest.mark.slow) if o in SLOW
                                    else o for o in README])
def test_typed_reader_counts_equal_the_readme(option, tmp_path):
    make, nodes, edges, dims, classes, split = README[option]
    g = make(tmp_path).process()  # read in place from the shared folder; nothing written there
    if nodes is not None:
        assert dict(zip(g.node_types, g.node_type_offset.diff().tolist())) == nodes
        if isinstance(edges, int):
            assert g.num_edges == edges and len(g.edge_types) in (90, 46)
        else:
            assert g.num_edges_per_type() == edges
        assert list(g.feature_dims.values()) == dims
    assert g.num_classes == classes
    sizes = tuple(0 if s is None else s.numel() for s in (g.train_idx, g.val_idx, g.test_idx))
    assert sizes == split
    assert not (HETERO / "DBLP" / "processed").exists()


@needs_shared
def test_entity_ids_are_sorted_terms():
    triples = read_ntriples(HETERO / "entities" / "aifb" / "raw" / "aifb_stripped.nt.gz")
    assert len(triples) == 29043 and all(p.startswith("<") for _, p, _ in triples)


@needs_shared
@pytest.mark.slow
def test_magnn_readers_match_pygs_classes(tmp_path, shared_datasets):
    """PyG's DBLP and IMDB built from copies of the same raw files give the same typed graph."""
    from torch_geometric.datasets import DBLP, IMDB

    for name, cls in (("DBLP", DBLP), ("IMDB", IMDB)):
        copy = shared_datasets(f"hetero/{name}")
        ref = cls(str(copy))[0]
        g = MagnnDataset(tmp_path / "data", name.lower(), raw_dir=str(copy / "raw")).process()
        for t in ref.node_types:
            if "x" in ref[t]:
                assert torch.equal(g.features[t], ref[t].x), (name, t)
        for et in ref.edge_types:
            _, idx, _ = g.edge_type_csc(et)
            ptr = g.edge_type_csc(et)[0]
            dst = torch.repeat_interleave(torch.arange(ptr.numel() - 1), ptr.diff())
            mine = set(zip(idx.tolist(), dst.tolist()))
            assert mine == set(zip(*ref[et].edge_index.tolist())), (name, et)


def test_a_strategy_that_does_not_train_types_refuses_a_typed_graph_in_one_line(tmp_path):
    """Until a strategy declares ``trains_types``, a typed dataset is refused at launch (its
    types would be ignored), naming the strategy and the graph."""
    from gnnscale import registry
    from gnnscale.runner.validate import validate
    from tests._train import make_cfg

    untyped = [name for name, cls in registry.schemas("strategy").items()
               if not cls.trains_types and not cls.meta]
    if not untyped:
        pytest.skip("every strategy trains typed graphs")
    cfg = make_cfg(tmp_path, "dataset=hetero_sim", "dataset.scale=0.002", "logger=none",
                   "model=rgcn", f"strategy={untyped[0]}")
    with pytest.raises(ConfigError, match=rf"typed graph \(4 node types.*strategy={untyped[0]} "
                                          r"does not train typed graphs"):
        validate(cfg)


def test_link_prediction_on_a_typed_graph_names_its_edge_type_at_launch(tmp_path):
    """task=link on a graph of several edge types needs task.edge_type (refused in one line
    listing them, as an unknown one is); named, the launcher prepares its split."""
    from gnnscale.runner.validate import validate
    from tests._train import make_cfg

    cfg = make_cfg(tmp_path, "dataset=hetero_sim", "dataset.scale=0.0005", "task=link",
                   "model=rgcn", "logger=none")
    with pytest.raises(ConfigError, match="task=link on hetero_sim-x0.0005 needs "
                                          "task.edge_type, the edge type to predict: one of "
                                          "writes, cites, affiliated_with, has_topic$"):
        validate(cfg)
    cfg.task.edge_type = "wrote"
    with pytest.raises(ConfigError, match="task.edge_type=wrote is not an edge type"):
        validate(cfg)
    cfg.task.edge_type = "writes"
    validate(cfg)
