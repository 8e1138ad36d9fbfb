"""Typed graph store: one fused CSC over node/edge types, per-type views and ids, features,
labels, the processed round trip, the homogeneous graph as the one-type case, and the one-line
errors for bad typed input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from gnnscale.data import graph as graph_mod
from gnnscale.data import processed
from gnnscale.data.graph import GraphStore
from gnnscale.data.metadata import DatasetMeta
from tests import _store_fns

COUNTS = {"paper": 6, "author": 4, "field": 3}
WRITES = ("author", "writes", "paper")
CITES = ("paper", "cites", "paper")
TOPIC = ("paper", "has_topic", "field")


def parts(seed: int = 0) -> dict:
    """Random per-type edge lists (type-local ids, with repeats) over COUNTS."""
    gen = torch.Generator().manual_seed(seed)

    def edges(src: str, dst: str, e: int) -> torch.Tensor:
        return torch.stack([torch.randint(0, COUNTS[src], (e,), generator=gen),
                            torch.randint(0, COUNTS[dst], (e,), generator=gen)])

    return {WRITES: edges("author", "paper", 12), CITES: edges("paper", "paper", 10),
            TOPIC: edges("paper", "field", 8)}


def build(edges: dict | None = None, **kw) -> GraphStore:
    """paper (8 features, labels, splits), author (3 features), field (none), with reverses."""
    gen = torch.Generator().manual_seed(1)
    args = dict(features={"paper": torch.rand(6, 8, generator=gen),
                          "author": torch.rand(4, 3, generator=gen)},
                y={"paper": torch.tensor([0, 1, 2, 0, 1, 2])},
                train_idx={"paper": torch.tensor([0, 1, 2])},
                val_idx={"paper": torch.tensor([3])}, test_idx={"paper": torch.tensor([4, 5])},
                add_reverse=True, name="typed")
    args.update(kw)
    return GraphStore.from_typed(COUNTS, parts() if edges is None else edges, **args)


@pytest.fixture(scope="module")
def typed() -> GraphStore:
    return build()


def pairs(e: torch.Tensor) -> set[tuple[int, int]]:
    return set(zip(*e.tolist()))


# ---- the fused CSC and its per-type views ------------------------------------------------------

def test_fused_csc_holds_each_edge_type_and_its_reverse(typed):
    given = parts()
    assert typed.is_typed and typed.node_types == ("paper", "author", "field")
    assert typed.node_type_offset.tolist() == [0, 6, 10, 13]
    assert typed.edge_types == (WRITES, CITES, TOPIC, ("paper", "rev_writes", "author"),
                                ("paper", "rev_cites", "paper"), ("field", "rev_has_topic",
                                                                  "paper"))
    off = dict(zip(typed.node_types, typed.node_type_offset.tolist()))
    ei = typed.edge_index()
    for k, (s, _, d) in enumerate(typed.edge_types):
        want = pairs(given[typed.edge_types[k % 3]]) if k < 3 else \
            pairs(given[typed.edge_types[k - 3]].flip(0))
        mine = typed.type_per_edge == k
        fused = pairs(torch.stack([ei[0][mine] - off[s], ei[1][mine] - off[d]]))
        assert fused == want  # deduped per type: each edge once
        assert int(mine.sum()) == len(want) == typed.num_edges_per_type()[k]
        ptr, idx, eids = typed.edge_type_csc(typed.edge_types[k])
        assert ptr.numel() == COUNTS[d] + 1 and int(ptr[-1]) == len(want)
        dst = torch.repeat_interleave(torch.arange(COUNTS[d]), ptr.diff())
        assert pairs(torch.stack([idx.long(), dst])) == want
        assert torch.equal(typed.indices[eids] - off[s], idx)  # eids are CSC positions
        assert bool((typed.type_per_edge[eids] == k).all())
    assert typed.edge_type_csc(CITES) is typed.edge_type_csc(CITES)  # cached
    key = typed.type_per_edge.long() * typed.num_nodes + typed.indices
    for v in range(typed.num_nodes):  # within each destination: sorted by (type, source)
        seg = key[typed.indptr[v]:typed.indptr[v + 1]]
        assert torch.equal(seg, seg.sort().values)


def test_ids_convert_between_global_and_type_local(typed):
    assert [typed.num_nodes_of(t) for t in typed.node_types] == [6, 4, 3]
    assert typed.node_type_of(torch.arange(13)).tolist() == [0] * 6 + [1] * 4 + [2] * 3
    assert typed.to_local("author", torch.tensor([6, 9])).tolist() == [0, 3]
    assert typed.to_global("field", torch.tensor([0, 2])).tolist() == [10, 12]
    with pytest.raises(ValueError, match=r"not all global ids of node type 'author' \(\[6, 10\)"):
        typed.to_local("author", torch.tensor([5]))
    with pytest.raises(ValueError, match=r"local ids of node type 'field' \(\[0, 3\)\)"):
        typed.to_global("field", torch.tensor([3]))
    with pytest.raises(ValueError, match="unknown node type 'venue'"):
        typed.num_nodes_of("venue")
    with pytest.raises(ValueError, match="unknown edge type"):
        typed.edge_type_csc(("paper", "writes", "author"))


def test_features_labels_and_splits_per_type(typed):
    assert typed.x is None and typed.num_features == 0
    assert set(typed.features) == {"paper", "author"}  # field has none
    assert typed.feature_dims == {"paper": 8, "author": 3, "field": 0}
    assert "read graph.features[node type]" in typed.no_x_reason()
    assert typed.target_types == ("paper",) and typed.num_classes == 3
    assert typed.y.tolist() == [0, 1, 2, 0, 1, 2] + [-1] * 7
    assert typed.train_idx.tolist() == [0, 1, 2] and typed.test_idx.tolist() == [4, 5]
    same = build(features={t: torch.full((n, 2), float(i)) for i, (t, n)
                           in enumerate(COUNTS.items())})
    assert same.x.shape == (13, 2) and not same.type_features  # one width: one x
    assert same.features["author"].data_ptr() == same.x[6:].data_ptr()  # views of x
    assert same.no_x_reason() is None


def test_one_combined_key_and_three_keys_build_the_same_csc(monkeypatch):
    w = {WRITES: torch.arange(12).float()}
    a = build(edge_weight=w)
    monkeypatch.setattr(graph_mod, "KEY_LIMIT", 0)
    b = build(edge_weight=w)
    for name in ("indptr", "indices", "type_per_edge", "edge_weight"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    tpe, w = a.type_per_edge, a.edge_weight
    assert w[(tpe != 0) & (tpe != 3)].eq(1).all()  # types without weights weigh 1
    assert torch.equal(w[tpe == 0].sort().values, w[tpe == 3].sort().values)  # the reverse too
    assert w[tpe == 0].sum() < torch.arange(12).sum()  # deduped: the repeats' weights left out


# ---- the homogeneous graph is the one-type case -----------------------------------------------

def test_homogeneous_graph_is_the_one_type_case(tiny_graph, tmp_path):
    g = tiny_graph
    assert g.node_types == ("node",) and g.edge_types == (("node", "to", "node"),)
    assert not g.is_typed and g.type_per_edge is None and g.target_types == ("node",)
    assert g.node_type_offset.tolist() == [0, g.num_nodes]
    ptr, idx, eids = g.edge_type_csc(("node", "to", "node"))
    assert ptr is g.indptr and idx is g.indices and torch.equal(eids, torch.arange(g.num_edges))
    assert g.features["node"] is g.x and g.num_edges_per_type() == [g.num_edges]
    processed.save(g, tmp_path / "g")
    assert "types" not in json.loads((tmp_path / "g" / "meta.json").read_text())
    meta = DatasetMeta.read(tmp_path / "g")
    assert meta == DatasetMeta.of(processed.load(tmp_path / "g"))
    assert not meta.is_typed and meta.num_nodes_per_type == (g.num_nodes,)
    assert meta.feature_dims == (g.num_features,) and meta.target_types == ("node",)
    one = GraphStore.from_typed({"node": 3}, {("node", "to", "node"): torch.tensor([[0, 1],
                                                                                    [1, 2]])})
    ref = GraphStore.from_edge_index(torch.tensor([[0, 1], [1, 2]]), 3)
    assert torch.equal(one.indptr, ref.indptr) and torch.equal(one.indices, ref.indices)


# ---- the processed format ----------------------------------------------------------------------

def test_typed_round_trip_is_mapped_verified_and_checksummed(typed, tmp_path):
    folder = tmp_path / "typed"
    digest = processed.save(typed, folder)
    g = processed.load(folder, verify=True)
    assert g.meta["checksum"] == digest == processed.checksum(typed)
    for name in ("indptr", "indices", "y", "train_idx", "node_type_offset", "type_per_edge"):
        assert torch.equal(getattr(g, name), getattr(typed, name)), name
    assert g.node_types == typed.node_types and g.edge_types == typed.edge_types
    assert g.target_types == ("paper",) and set(g.type_features) == {"paper", "author"}
    assert torch.equal(g.features["author"], typed.features["author"])
    assert _store_fns.mapped_file(g.type_per_edge.data_ptr()) == str(folder / "type_per_edge.npy")
    assert _store_fns.mapped_file(g.features["paper"].data_ptr()) == str(folder / "x__paper.npy")
    meta = DatasetMeta.read(folder)
    assert meta == DatasetMeta.of(g) and meta.is_typed
    assert meta.num_nodes_per_type == (6, 4, 3) and meta.feature_dims == (8, 3, 0)
    assert meta.num_edges_per_type == tuple(typed.num_edges_per_type())
    assert "one feature matrix x" in meta.lacks() and "paper 8, author 3, field none" in \
        meta.lacks()
    tpe = np.load(folder / "type_per_edge.npy")
    tpe[[0, -1]] = tpe[[-1, 0]]
    np.save(folder / "type_per_edge.npy", tpe)
    with pytest.raises(processed.ProcessedDataError, match="type_per_edge.npy: checksum mismatch"):
        processed.load(folder)


def test_edited_types_section_is_refused_naming_the_field(typed, tmp_path):
    processed.save(typed, tmp_path / "g")
    meta_file = tmp_path / "g" / "meta.json"
    meta = json.loads(meta_file.read_text())
    meta["types"]["target_types"] = ["paper", "author"]
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(processed.ProcessedDataError, match="meta.json: checksum mismatch"):
        processed.load(tmp_path / "g")
    assert DatasetMeta.read(tmp_path / "g") is None
    meta["types"]["num_nodes"] = [6, 4, 2]
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(processed.ProcessedDataError, match="types.num_nodes is not 3 counts"):
        processed.load(tmp_path / "g")
    del meta["types"]
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(processed.ProcessedDataError, match="without a types section"):
        processed.load(tmp_path / "g")


# ---- bad input: one clear line each ------------------------------------------------------------

@pytest.mark.parametrize("change, match", [
    ({"edges": {("paper", "cites", "venue"): torch.tensor([[0], [0]])}},
     r"\('paper', 'cites', 'venue'\) names node type 'venue', which is not one of the node "
     r"types \(paper, author, field\)"),
    ({"edges": {WRITES: torch.tensor([[0, 4], [0, 1]])}},
     r"edges\[\('author', 'writes', 'paper'\)\] holds source ids in \[0, 4\] but there are 4 "
     r"'author' nodes"),
    ({"edges": {TOPIC: torch.tensor([[0], [3]])}},
     r"holds destination ids in \[3, 3\] but there are 3 'field' nodes"),
    ({"features": {"author": torch.rand(5, 3)}},
     r"features\['author'\] has shape \(5, 3\): 4 rows expected, one per 'author' node"),
    ({"features": {"venue": torch.rand(5, 3)}}, "features names node type 'venue'"),
    ({"target_types": ("paper", "author")},
     "target type 'author' has no labels: y gives labels for paper"),
    ({"y": {"paper": torch.zeros(5, dtype=torch.long)}}, r"y\['paper'\] has shape \(5,\): 6"),
    ({"train_idx": {"author": torch.tensor([0])}},
     r"train_idx names node type 'author', which is not a target type \(paper\)"),
    ({"train_idx": {"paper": torch.tensor([6])}}, r"train_idx\['paper'\] holds ids in \[6, 6\]"),
    ({"edges": {CITES: torch.tensor([[0], [1]]), ("paper", "rev_cites", "paper"):
                torch.tensor([[1], [0]])}}, "add_reverse would add edge type"),
])
def test_bad_typed_input_gets_one_clear_error(change, match):
    with pytest.raises(ValueError, match=match) as err:
        build(**change)
    assert "\n" not in str(err.value)


def test_bad_fused_arrays_get_one_clear_error(typed):
    fields = dict(indptr=typed.indptr, indices=typed.indices, node_types=typed.node_types,
                  node_type_offset=typed.node_type_offset, edge_types=typed.edge_types,
                  type_per_edge=typed.type_per_edge)
    GraphStore(**fields)
    bad = typed.indices.clone()
    first = int(typed.indptr[0])  # paper 0's first in-edge comes from an author
    bad[first] = 0  # now from paper 0
    with pytest.raises(ValueError, match=r"starts at node 0 of type 'paper'; edges of that type "
                                         r"start at 'author' nodes \(global ids \[6, 10\)\)"):
        GraphStore(**{**fields, "indices": bad})
    a, b = int(typed.indptr[0]), int(typed.indptr[1])  # paper 0's in-edges, reversed
    assert typed.type_per_edge[a] != typed.type_per_edge[b - 1]
    ind, tpe = typed.indices.clone(), typed.type_per_edge.clone()
    ind[a:b], tpe[a:b] = ind[a:b].flip(0), tpe[a:b].flip(0)
    with pytest.raises(ValueError, match=r"the in-edges of node 0 are not grouped by edge type "
                                         r"\(edge \d+\)"):
        GraphStore(**{**fields, "indices": ind, "type_per_edge": tpe})
    with pytest.raises(ValueError, match="names node type 'venue'"):
        GraphStore(**{**fields, "edge_types": (*typed.edge_types[:-1], ("venue", "x", "paper"))})
    with pytest.raises(ValueError, match="features\\['author'\\] has shape \\(2, 3\\): 4 rows"):
        GraphStore(**fields, type_features={"author": torch.rand(2, 3)})
    with pytest.raises(ValueError, match="target type 'author' has no labels: y is -1 on all"):
        GraphStore(**fields, y=typed.y, target_types=("paper", "author"))
    with pytest.raises(ValueError, match="train_idx holds node 7 of type 'author', which is not "
                                         "a target type"):
        GraphStore(**fields, y=typed.y, target_types=("paper",), train_idx=torch.tensor([0, 7]))
    with pytest.raises(ValueError, match="names its target_types"):
        GraphStore(**fields, y=typed.y)
