"""The ``offload`` suite's volumes from the plans (benchmarks.offload) on a tiny graph."""

from __future__ import annotations

import pytest

from benchmarks.offload import offload_volumes, table8
from gnnscale.partition.metis import MetisPartitioner
from gnnscale.partition.random import RandomPartitioner
from gnnscale.strategies.offload.chunks import two_level
from gnnscale.strategies.offload.transfers import DEDUP
from tests import _fullgraph_fns as F

WORLD = 2


@pytest.fixture(scope="module")
def graph():
    return F.make_graph()


@pytest.mark.parametrize("first", ["metis", "random"])
def test_dedup_levels_load_fewer_rows_and_alpha_grows_with_chunks(graph, first):
    parter = MetisPartitioner() if first == "metis" else RandomPartitioner(seed=1)
    part = parter.partition(graph, WORLD).part
    n = graph.num_nodes
    alphas = []
    for chunks in (1, 2, 4):
        for reorg in (False, True):
            t = table8(graph, part, WORLD, chunks, reorg)
            none, inter, both = (t["levels"][d]["h2d_rows"] for d in DEDUP)
            assert none >= inter >= both > 0, (chunks, reorg)
            # the baseline loads every chunk's whole neighbour set: alpha |V| rows
            assert t["baseline_per_v"] == pytest.approx(t["alpha"])
            assert none == sum(x.numel() for p in two_level(graph, part, WORLD, chunks,
                                                            reorg).load for x in p)
            assert t["inter_saving_per_v"] + t["intra_saving_per_v"] == \
                pytest.approx((none - both) / n)
            assert t["saving"] == pytest.approx(1 - both / none)
            # every transition row each batch needs arrives once: loaded, or reused in place
            lv = t["levels"]
            assert lv["inter+intra"]["h2d_rows"] + lv["inter+intra"]["reused_rows"] == inter
            assert lv["none"]["reused_rows"] == lv["inter"]["reused_rows"] == 0
            if chunks == 1:
                assert both == inter  # one batch: nothing to reuse
            assert lv["none"]["h2d_bytes"] == none * graph.num_features * 4
            assert lv["none"]["plan_s"] > 0
        alphas.append(t["alpha"])
    assert alphas[0] >= 1.0
    assert alphas[0] < alphas[1] < alphas[2]


def test_volumes_reuse_a_chunking_and_match_a_fresh_one(graph):
    part = RandomPartitioner(seed=1).partition(graph, WORLD).part
    chunking = two_level(graph, part, WORLD, 3, True)
    a = offload_volumes(graph, part, WORLD, 3, True, "inter+intra", chunking, 0.0)
    b = offload_volumes(graph, part, WORLD, 3, True, "inter+intra")
    for k in ("h2d_rows", "reused_rows", "shared_rows", "alpha"):
        assert a[k] == b[k], k


def test_device_bounds_with_metis_chunks_and_their_drop_per_doubling():
    """The suite's bounds for both level-2 cuts: one chunk is the same plan either way, and
    per_doubling turns bounds into HongTu 4.3's drop per doubling of chunks."""
    from benchmarks import offload as B
    from gnnscale.data.synthetic import generate

    g = generate("products_sim", scale=0.002, seed=0)
    book = B._book(g, "metis", 0)
    cfg = {**B.settings(True), "hidden": 16}
    counts = (1, 2, 4)
    by_range = B.device_bounds(g, book, cfg, counts)
    by_metis = B.device_bounds(g, book, cfg, counts, level2="metis")
    assert by_range[1]["bound_bytes"] == by_metis[1]["bound_bytes"]
    assert by_metis[4]["alpha"] < by_range[4]["alpha"]
    ratios: dict = {}
    B.per_doubling(by_metis, "metis", ratios)
    steps = ratios["memory_per_doubling"]["metis"]["per_step"]
    assert steps == pytest.approx([1 - by_metis[2]["bound_bytes"] / by_metis[1]["bound_bytes"],
                                   1 - by_metis[4]["bound_bytes"] / by_metis[2]["bound_bytes"]])
