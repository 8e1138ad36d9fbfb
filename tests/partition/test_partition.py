"""Partitioners, partition book, quality figures, cache and scripts/partition.py."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from gnnscale import registry
from gnnscale.data.graph import GraphStore
from gnnscale.partition import PartitionBook, get_partition
from gnnscale.partition.cvc import CvcPartitioner, grid_shape
from gnnscale.partition.fennel import FennelPartitioner
from gnnscale.partition.hvc import HvcPartitioner
from gnnscale.partition.iec import IecPartitioner
from gnnscale.partition.ldg import LdgPartitioner
from gnnscale.partition.metis import MetisPartitioner
from gnnscale.partition.oec import OecPartitioner
from gnnscale.partition.random import RandomPartitioner
from gnnscale.partition.range import RangePartitioner

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = {
    "metis": MetisPartitioner, "random": RandomPartitioner, "range": RangePartitioner,
    "ldg": LdgPartitioner, "fennel": FennelPartitioner, "oec": OecPartitioner,
    "iec": IecPartitioner, "cvc": CvcPartitioner, "hvc": HvcPartitioner,
}


def community_graph(n: int = 2000, k: int = 8, deg: int = 8, p_in: float = 0.92,
                    seed: int = 0) -> GraphStore:
    """Undirected graph with ``k`` planted communities (ids shuffled) and 10% training vertices."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (n * deg,), generator=g)
    comm = src * k // n
    lo, hi = comm * n // k, (comm + 1) * n // k
    inside = lo + (torch.rand(n * deg, generator=g) * (hi - lo)).long()
    dst = torch.where(torch.rand(n * deg, generator=g) < p_in, inside,
                      torch.randint(0, n, (n * deg,), generator=g))
    perm = torch.randperm(n, generator=g)
    train = torch.randperm(n, generator=g)[: n // 10]
    return GraphStore.from_edge_index(torch.stack([perm[src], perm[dst]]), n, symmetrize=True,
                                      self_loops="remove", train_idx=train, name="community")


def awkward_graph(seed: int = 1) -> GraphStore:
    """Directed edges, self loops, repeated hubs and 50 isolated vertices (ids 550..599)."""
    g = torch.Generator().manual_seed(seed)
    n, m = 600, 3000
    src = torch.randint(0, 550, (m,), generator=g)
    dst = torch.where(torch.rand(m, generator=g) < 0.2, torch.randint(0, 5, (m,), generator=g),
                      torch.randint(0, 550, (m,), generator=g))
    loops = torch.arange(0, 550, 7)
    ei = torch.cat([torch.stack([src, dst]), torch.stack([loops, loops])], 1)
    return GraphStore.from_edge_index(ei, n, train_idx=torch.arange(0, 600, 5), name="awkward")


@pytest.fixture(scope="module")
def awkward() -> GraphStore:
    return awkward_graph()


@pytest.fixture(scope="module")
def community() -> GraphStore:
    return community_graph()


def expected_mirrors(graph: GraphStore, book: PartitionBook) -> list[set[int]]:
    """Mirrors recomputed by brute force from where every edge is placed."""
    src, dst = graph.edge_index().tolist()
    epart = book.edge_part.tolist() if book.kind == "vertex_cut" else \
        [int(book.part[d]) for d in dst]
    held = [set() for _ in range(book.num_parts)]
    for s, d, q in zip(src, dst, epart):
        held[q].update((s, d))
    part = book.part.tolist()
    return [{v for v in held[q] if part[v] != q} for q in range(book.num_parts)]


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_assignment_complete_and_mirrors_consistent(awkward, option):
    p = 4
    book = OPTIONS[option]().partition(awkward, p)
    n, e = awkward.num_nodes, awkward.num_edges
    assert book.part.shape == (n,) and 0 <= int(book.part.min()) and int(book.part.max()) < p
    assert torch.bincount(book.part, minlength=p).min() > 0
    owned = torch.cat([book.owned(q) for q in range(p)])  # one master per vertex
    assert torch.equal(torch.sort(owned).values, torch.arange(n))
    if book.kind == "vertex_cut":
        assert book.edge_part.shape == (e,)
        assert 0 <= int(book.edge_part.min()) and int(book.edge_part.max()) < p
    want = expected_mirrors(awkward, book)
    got = [set(m.tolist()) for m in book.mirrors]
    assert got == want
    copies = n + sum(len(m) for m in want)
    assert book.quality["replication_factor"] == pytest.approx(copies / n)
    src, dst = awkward.edge_index()
    eown = book.edge_owner(awkward)
    local = ((book.part[src] == eown) & (book.part[dst] == eown)).double().mean()
    assert book.quality["local_edge_ratio"] == pytest.approx(float(local))
    assert "replication_factor" in book.report()


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_renumbering_ranges_match_owner(awkward, option):
    book = OPTIONS[option]().partition(awkward, 3)
    n = awkward.num_nodes
    assert torch.equal(book.new_id[book.old_id], torch.arange(n))
    assert int(book.part_ranges[0]) == 0 and int(book.part_ranges[-1]) == n
    assert torch.all(torch.diff(book.part_ranges) > 0)
    new = torch.arange(n)
    assert torch.equal(book.owner_of_new(new), book.part[book.old_id])
    assert torch.equal(book.owner_of_new(book.new_id), book.part)
    for q in range(3):
        assert torch.all(book.part[book.owned(q)] == q)


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_deterministic_for_a_seed(awkward, option):
    a = OPTIONS[option](seed=3).partition(awkward, 4)
    b = OPTIONS[option](seed=3).partition(awkward, 4)
    assert torch.equal(a.part, b.part)
    if a.kind == "vertex_cut":
        assert torch.equal(a.edge_part, b.edge_part)


def test_random_seed_changes_assignment(awkward):
    a = RandomPartitioner(seed=0).partition(awkward, 4).part
    b = RandomPartitioner(seed=1).partition(awkward, 4).part
    assert not torch.equal(a, b)


@pytest.mark.parametrize("num_parts", [4, 8])
def test_metis_quality_and_balance(community, num_parts):
    tol = 1.05
    book = MetisPartitioner(imbalance=tol).partition(community, num_parts)
    q = book.quality
    for key in ("balance_vertices", "balance_edges", "balance_train"):
        assert q[key] <= tol + 1e-9, (key, q[key])
    assert q["local_edge_ratio"] >= 0.85  # 8 planted communities, 92% of edges inside
    assert q["time_s"] > 0


def test_metis_single_constraint_and_sample_frequency(community):
    freq = torch.rand(community.num_nodes, generator=torch.Generator().manual_seed(0)) ** 3
    part = MetisPartitioner(balance_train=False, balance_edges=False,
                            vertex_weights="sample_frequency", imbalance=1.1)
    book = part.partition(community, 4, vertex_weight=freq)
    w = np.rint(freq.numpy() / freq.numpy().mean() * 100)
    loads = np.bincount(book.part.numpy(), weights=w, minlength=4)
    assert loads.max() / loads.mean() <= 1.1 + 1e-9
    with pytest.raises(ValueError, match="sampling frequency"):
        part.partition(community, 4)
    with pytest.raises(ValueError, match="vertex_weights"):
        MetisPartitioner(vertex_weights="degree")


def test_metis_on_awkward_graph_is_local_and_balanced(awkward):
    book = MetisPartitioner(balance_train=False, balance_edges=False).partition(awkward, 4)
    assert book.quality["balance_vertices"] <= 1.05 + 1e-9


def test_streaming_and_range_balance(community):
    n, p = community.num_nodes, 4
    for part, tol in ((LdgPartitioner(imbalance=1.05), 1.05),
                      (FennelPartitioner(imbalance=1.1), 1.1),
                      (LdgPartitioner(order="random"), 1.05)):
        q = part.partition(community, p).quality
        assert q["balance_vertices"] <= math.ceil(tol * n / p) / (n / p) + 1e-9
        assert q["local_edge_ratio"] > 0.4  # far above random's 1/p on a community graph
    rnd = RandomPartitioner().partition(community, p).quality
    assert rnd["balance_vertices"] <= math.ceil(n / p) / (n / p)
    book = RangePartitioner(alpha=0.0).partition(community, p)
    assert torch.all(torch.diff(book.part) >= 0)  # contiguous chunks
    edges = torch.tensor(book.quality["per_part"]["edges"], dtype=torch.float64)
    assert float(edges.max() / edges.mean()) <= 1 + float(community.in_degree().max()) / \
        float(edges.mean())


def test_vertex_cut_policies(community):
    src, dst = community.edge_index()
    oec = OecPartitioner().partition(community, 4)
    iec = IecPartitioner().partition(community, 4)
    assert torch.equal(oec.edge_part, oec.part[src])
    assert torch.equal(iec.edge_part, iec.part[dst])
    assert torch.equal(HvcPartitioner(threshold=0).partition(community, 4).edge_part,
                       oec.edge_part)
    assert torch.equal(HvcPartitioner(threshold=10**9).partition(community, 4).edge_part,
                       iec.edge_part)
    hub = int(torch.argmax(community.in_degree()))
    hvc = HvcPartitioner(threshold=int(community.in_degree()[hub]) - 1).partition(community, 4)
    cut = dst == hub
    assert torch.equal(hvc.edge_part[cut], hvc.part[src[cut]])
    assert torch.equal(hvc.edge_part[~cut], hvc.part[dst[~cut]])


@pytest.mark.parametrize("cls", [OecPartitioner, IecPartitioner, CvcPartitioner, HvcPartitioner])
def test_vertex_cut_masters_from_an_edge_cut(community, cls):
    """masters=metis takes METIS's parts as masters: far fewer replicas on a shuffled graph."""
    metis = MetisPartitioner().partition(community, 4)
    blocked = cls().partition(community, 4)
    from_metis = cls(masters="metis").partition(community, 4)
    assert torch.equal(from_metis.part, metis.part)
    q, qb = from_metis.quality, blocked.quality
    assert q["masters"] == "metis" and qb["masters"] == "blocked"
    assert q["masters_replication_factor"] == pytest.approx(metis.quality["replication_factor"])
    assert q["replication_factor"] < 0.7 * qb["replication_factor"]
    assert "masters (metis) as an edge-cut" in from_metis.report()
    assert from_metis.meta["partitioner"]["masters"] == "metis"
    rnd = cls(masters="random", seed=3).partition(community, 4)
    assert torch.equal(rnd.part, RandomPartitioner(seed=3).partition(community, 4).part)
    with pytest.raises(ValueError, match="partitioner.masters must be one of"):
        cls(masters="oec")


@pytest.mark.parametrize("num_parts", [8, 16])
def test_cvc_partners_and_replication_vs_oec(num_parts):
    from gnnscale.data import synthetic

    graph = synthetic.generate("tiny", seed=0)  # power-law degrees
    r, c = grid_shape(num_parts)
    cvc = CvcPartitioner().partition(graph, num_parts)
    oec = OecPartitioner().partition(graph, num_parts)
    src, dst = graph.edge_index()
    assert torch.equal(cvc.edge_part // c, cvc.part[src] // c)  # row of the source's master
    assert torch.equal(cvc.edge_part % c, cvc.part[dst] % c)  # column of the dest's master
    assert cvc.quality["partners_max"] <= (r - 1) + (c - 1)
    assert cvc.quality["replication_factor"] < oec.quality["replication_factor"]


def test_clear_errors(awkward):
    with pytest.raises(ValueError, match="exceeds the 600 vertices"):
        MetisPartitioner().partition(awkward, 601)
    with pytest.raises(ValueError, match="positive integer"):
        RandomPartitioner().partition(awkward, 0)
    with pytest.raises(ValueError, match="square number of parts, got 8: use 4 or 9"):
        CvcPartitioner(require_square=True).partition(awkward, 8)
    with pytest.raises(ValueError, match="does not divide"):
        CvcPartitioner(rows=3).partition(awkward, 8)
    assert grid_shape(16, require_square=True) == (4, 4) and grid_shape(8) == (2, 4)
    with pytest.raises(ValueError, match="imbalance"):
        LdgPartitioner(imbalance=0.9)
    with pytest.raises(ValueError, match="order"):
        FennelPartitioner(order="bfs")


def test_cache_hit_and_invalidation(tmp_path, awkward):
    logs: list[str] = []
    cfg = OmegaConf.create(MetisPartitioner(seed=1).config())
    first = get_partition(awkward, cfg, 4, cache_root=tmp_path, log=logs.append)
    assert "computed" in logs[-1]
    second = get_partition(awkward, MetisPartitioner(seed=1), 4, cache_root=tmp_path,
                           log=logs.append)
    assert "loaded cached" in logs[-1]
    assert torch.equal(first.part, second.part) and second.kind == "edge_cut"
    assert torch.equal(first.mirror_ids, second.mirror_ids)
    assert torch.equal(first.part_ranges, second.part_ranges)
    assert second.quality["local_edge_ratio"] == first.quality["local_edge_ratio"]
    get_partition(awkward, MetisPartitioner(seed=2), 4, cache_root=tmp_path, log=logs.append)
    assert "computed" in logs[-1]  # config changed
    get_partition(awkward, MetisPartitioner(seed=1), 2, cache_root=tmp_path, log=logs.append)
    assert "computed" in logs[-1]  # part count changed
    changed = awkward_graph(seed=7)
    get_partition(changed, MetisPartitioner(seed=1), 4, cache_root=tmp_path, log=logs.append)
    assert "computed" in logs[-1]  # dataset changed
    vc = get_partition(awkward, CvcPartitioner(), 4, cache_root=tmp_path, log=logs.append)
    again = get_partition(awkward, CvcPartitioner(), 4, cache_root=tmp_path, log=logs.append)
    assert "loaded cached" in logs[-1] and torch.equal(vc.edge_part, again.edge_part)
    assert [m.tolist() for m in vc.mirrors] == [m.tolist() for m in again.mirrors]


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_yaml_composes_and_builds(option):
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base=None):
        cfg = compose(config_name=f"partitioner/{option}", overrides=["partitioner.seed=5"])
        with pytest.raises(Exception, match="misspelt"):
            compose(config_name=f"partitioner/{option}", overrides=["partitioner.misspelt=1"])
    part = registry.build(cfg.partitioner)
    assert isinstance(part, OPTIONS[option]) and part.seed == 5


def test_partition_script_run(tmp_path):
    spec = importlib.util.spec_from_file_location("partition_script",
                                                  ROOT / "scripts" / "partition.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    cfg = OmegaConf.create({
        "data_root": str(tmp_path),
        "dataset": {"_target_": "gnnscale.data.synthetic.SyntheticDataset",
                    "root": str(tmp_path), "preset": "tiny"},
        "partitioner": {"_target_": "gnnscale.partition.fennel.FennelPartitioner"},
        "num_parts": 4, "out": str(tmp_path / "q.json"),
    })
    logs: list[str] = []
    book = script.run(cfg, log=logs.append)
    assert book.num_parts == 4 and (tmp_path / "q.json").is_file()
    assert any("partition quality" in m for m in logs)
    logs.clear()
    script.run(cfg, log=logs.append)
    assert any("loaded cached" in m for m in logs)
