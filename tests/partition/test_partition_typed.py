"""Partitioners on typed graphs: every node type is balanced over the parts (each partitioner's
tolerance in :func:`type_cap`), the books of untyped graphs are unchanged (digests computed on
main before per-type balance), the quality report gains per-type balance, and only a typed
graph's cache key changes."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest
import torch

from gnnscale.data.graph import GraphStore
from gnnscale.data.hetero_sim import generate
from gnnscale.data.schemas import HeteroSimConfig
from gnnscale.partition import get_partition
from gnnscale.partition.book import format_table
from gnnscale.partition.cvc import CvcPartitioner
from gnnscale.partition.fennel import FennelPartitioner
from gnnscale.partition.hvc import HvcPartitioner
from gnnscale.partition.iec import IecPartitioner
from gnnscale.partition.ldg import LdgPartitioner
from gnnscale.partition.metis import MetisPartitioner
from gnnscale.partition.oec import OecPartitioner
from gnnscale.partition.random import RandomPartitioner
from gnnscale.partition.range import RangePartitioner
from gnnscale.partition.store import cache_dir, config_hash
from tests._typed_fns import make_typed_graph

#: sha256 (first 16 hex digits) of ``part`` (+ ``edge_part``) of :func:`homo_graph`'s books,
#: computed once on main at b483a8b, before the partitioners balanced node types: an untyped
#: graph is the one-type case and must get exactly the same book (the test hashes ``assign``'s
#: output, which is the book's ``part`` / ``edge_part``, to skip the quality figures)
UNTYPED_DIGESTS = {
    (3, "metis"): "e9d3cade91365621", (3, "random"): "1a4d298ce79a4da3",
    (3, "range"): "391086cf640b0782", (3, "ldg"): "35d4e6fdc68bce4a",
    (3, "fennel"): "5dceb047cc884cf2", (3, "oec"): "d801d93a6fa32138",
    (3, "iec"): "bcca1a1d33addb8c", (3, "cvc"): "29f9462a5bca25cc",
    (3, "hvc"): "ca55077ba2755d24",
    (4, "metis"): "cfc1ea7efd247dc5", (4, "random"): "8d0a16e0e728520a",
    (4, "range"): "59cab7936c87f76c", (4, "ldg"): "6ba1b5865d580e29",
    (4, "fennel"): "4d38cddbe4cd9879", (4, "oec"): "38fa0ead8d3c62ce",
    (4, "iec"): "d8fd6ee11deeeb38", (4, "cvc"): "3d87cc44ca899bd2",
    (4, "hvc"): "f043810727d9c7f3",
}
#: main's ``config_hash(MetisPartitioner())`` (b483a8b): an untyped graph's cache stays valid
UNTYPED_METIS_KEY = "6c6f223c01b60fd5"


def untyped_partitioners() -> dict:
    """The options (and masters) the digests above were computed with."""
    return {"metis": MetisPartitioner(), "random": RandomPartitioner(seed=2),
            "range": RangePartitioner(), "ldg": LdgPartitioner(),
            "fennel": FennelPartitioner(order="random", seed=1), "oec": OecPartitioner(),
            "iec": IecPartitioner(masters="metis"), "cvc": CvcPartitioner(masters="ldg"),
            "hvc": HvcPartitioner(masters="fennel", threshold=10)}


def homo_graph() -> GraphStore:
    """400 vertices in 4 planted communities (ids shuffled), a third of them training."""
    g = torch.Generator().manual_seed(5)
    n, k = 400, 4
    src = torch.randint(0, n, (n * 6,), generator=g)
    inside = (src * k // n) * n // k + torch.randint(0, n // k, (n * 6,), generator=g)
    dst = torch.where(torch.rand(n * 6, generator=g) < 0.9, inside,
                      torch.randint(0, n, (n * 6,), generator=g))
    perm = torch.randperm(n, generator=g)
    return GraphStore.from_edge_index(torch.stack([perm[src], perm[dst]]), n, symmetrize=True,
                                      self_loops="remove", train_idx=torch.arange(0, n, 3),
                                      name="homo")


def assignment_digest(out: torch.Tensor | tuple[torch.Tensor, torch.Tensor]) -> str:
    part, edge_part = out if isinstance(out, tuple) else (out, None)
    h = hashlib.sha256(torch.as_tensor(part).long().numpy().tobytes())
    if edge_part is not None:
        h.update(edge_part.long().numpy().tobytes())
    return h.hexdigest()[:16]


def test_untyped_books_are_unchanged():
    graph = homo_graph()
    got = {(k, name): assignment_digest(p.assign(graph, k, None))
           for k in (3, 4) for name, p in untyped_partitioners().items()}
    assert got == UNTYPED_DIGESTS
    book = MetisPartitioner().partition(graph, 3)
    assert assignment_digest(book.part) == UNTYPED_DIGESTS[(3, "metis")]
    assert "balance_per_type" not in book.quality


def type_cap(option: str, n_t: int, k: int) -> float:
    """The most vertices of a type with ``n_t`` vertices one part may own (edge-cuts):
    METIS (after its rebalance) ``imbalance`` x the mean, at least the mean + 1 (one vertex's
    granularity); ldg / fennel their hard capacity ``ceil(imbalance x mean)``; random the
    ceiling of the mean (counts differ by at most one)."""
    mean = n_t / k
    if option == "metis":
        return max(1.05 * mean, mean + 1)
    if option in ("ldg", "fennel"):
        imb = 1.05 if option == "ldg" else 1.1
        return max(math.ceil(imb * mean), math.ceil(mean))
    assert option == "random"
    return math.ceil(mean)


def range_weights(graph: GraphStore, option: str, k: int) -> np.ndarray:
    """What range (Gemini: ``8 (k - 1)`` + in-edges) and blocked masters (in + out edges + the
    mean degree) balance within each type."""
    if option == "range":
        return graph.in_degree().numpy() + 8.0 * (k - 1)
    deg = (graph.in_degree() + graph.out_degree()).numpy().astype(np.float64)
    return deg + max(deg.mean(), 1.0)


def check_per_type(graph: GraphStore, book, option: str, k: int) -> None:
    """Every node type within ``option``'s tolerance; the quality report per type agrees."""
    off = graph.node_type_offset.tolist()
    q = book.quality
    assert set(q["balance_per_type"]) == set(graph.node_types)
    for i, t in enumerate(graph.node_types):
        part = book.part[off[i]:off[i + 1]]
        counts = torch.bincount(part, minlength=k)
        assert q["vertices_per_type"][t] == counts.tolist()
        assert q["balance_per_type"][t] == pytest.approx(counts.max().item() / counts.double()
                                                         .mean().item())
        if option in ("range", "blocked"):  # one contiguous slice of every type per part,
            assert bool((part[1:] >= part[:-1]).all())  # each balancing the type's weight
            w = range_weights(graph, option, k)[off[i]:off[i + 1]]
            load = np.bincount(part.numpy(), weights=w, minlength=k)
            assert load.max() <= w.sum() / k + w.max() + 1e-9, (option, t, load)
        else:
            assert counts.max().item() <= type_cap(option, off[i + 1] - off[i], k), \
                (option, t, counts.tolist())
    assert q["balance_types_max"] == max(q["balance_per_type"].values())
    assert "balance per node type: " in format_table(q)


TYPED = [("metis", MetisPartitioner()), ("ldg", LdgPartitioner()),
         ("fennel", FennelPartitioner()), ("random", RandomPartitioner()),
         ("range", RangePartitioner())]


def test_tiny_typed_graph_every_partitioner_balances_each_type():
    graph = make_typed_graph()
    for name, p in TYPED:
        check_per_type(graph, p.partition(graph, 3), name, 3)
    for vc in (OecPartitioner(), IecPartitioner(), CvcPartitioner(), HvcPartitioner(threshold=5)):
        check_per_type(graph, vc.partition(graph, 3), "blocked", 3)  # masters per type
    for name in ("metis", "ldg", "random"):
        check_per_type(graph, IecPartitioner(masters=name).partition(graph, 3), name, 3)


def test_hetero_sim_each_type_balanced_with_edge_cut_quality():
    graph = generate(HeteroSimConfig(scale=0.002, seed=0))
    assert len(graph.node_types) == 4
    ratio = {}
    for name, p in TYPED:
        book = p.partition(graph, 4)
        check_per_type(graph, book, name, 4)
        ratio[name] = book.quality["local_edge_ratio"]
        assert book.quality["balance_edges"] is not None
    check_per_type(graph, CvcPartitioner().partition(graph, 4), "blocked", 4)
    # balance per type keeps the partitioners' locality: METIS well above the streaming ones,
    # which are well above random's 1/k
    assert ratio["metis"] > 0.7 and min(ratio["ldg"], ratio["fennel"]) > 0.5
    assert abs(ratio["random"] - 0.25) < 0.02


def test_only_a_typed_graphs_cache_key_changes(tmp_path):
    metis = MetisPartitioner()
    assert config_hash(metis) == UNTYPED_METIS_KEY
    homo, typed = homo_graph(), make_typed_graph()
    assert cache_dir(homo, metis, 2, tmp_path).name == f"metis-p2-{UNTYPED_METIS_KEY}"
    assert cache_dir(typed, metis, 2, tmp_path).name == f"metis-p2-{config_hash(metis, typed=True)}"
    assert config_hash(metis, typed=True) != UNTYPED_METIS_KEY
    first = get_partition(typed, RandomPartitioner(), 2, cache_root=tmp_path, log=None)
    again = get_partition(typed, RandomPartitioner(), 2, cache_root=tmp_path, log=None)
    assert torch.equal(first.part, again.part) and again.quality["balance_per_type"]
