"""Rank functions for the multi-process feature-store tests (spawn needs importable targets)."""

from __future__ import annotations

import torch

from gnnscale.cache.degree import DegreePolicy
from gnnscale.cache.store import build_feature_store
from gnnscale.data.graph import GraphStore


def make_graph(n: int = 300, f: int = 6, seed: int = 0) -> GraphStore:
    """A small random graph with features (same on every rank for a seed)."""
    gen = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, 6 * n), generator=gen)
    x = torch.randn(n, f, generator=gen)
    return GraphStore.from_edge_index(ei, n, x=x, train_idx=torch.arange(0, n, 3))


def partitioned_gather(topo, ratio: float, rounds: int) -> dict:
    """Every rank gathers random ids (rank 1's first request is empty); returns what it saw."""
    g = make_graph()
    part = torch.arange(g.num_nodes) % topo.world_size
    store = build_feature_store(g, DegreePolicy(ratio=ratio, placement="partitioned"),
                                topo=topo, part=part, seed=0)
    gen = torch.Generator().manual_seed(100 + topo.rank)
    ok, expect = True, dict.fromkeys(("local", "remote", "host"), 0)
    for r in range(rounds):
        k = 0 if (r == 0 and topo.rank == 1) else int(torch.randint(1, 120, (1,), generator=gen))
        ids = torch.randint(0, g.num_nodes, (k,), generator=gen)
        rows = store.gather(ids)
        ok &= torch.equal(rows, g.x[ids])
        own = store.owner[ids].long()
        expect["local"] += int((own == topo.rank).sum())
        expect["remote"] += int(((own >= 0) & (own != topo.rank)).sum())
        expect["host"] += int((own < 0).sum())
    return {"ok": bool(ok), "expect": expect, "stats": store.epoch_stats(),
            "summed": store.epoch_stats(reduce=True), "cached": store.cached_ids.tolist(),
            "row_bytes": store.row_bytes, "collective": store.collective}


def replicated_gather(topo, ratio: float) -> dict:
    """Replicated placement: identical caches, no rank-to-rank traffic."""
    g = make_graph()
    store = build_feature_store(g, DegreePolicy(ratio=ratio), topo=topo, seed=0)
    ids = torch.randint(0, g.num_nodes, (50,), generator=torch.Generator().manual_seed(topo.rank))
    ok = torch.equal(store.gather(ids), g.x[ids])
    return {"ok": bool(ok), "cached": store.cached_ids.tolist(), "stats": store.epoch_stats()}
