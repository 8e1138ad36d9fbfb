"""Feature store, cache policies and placement (gnnscale.cache)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from gnnscale.cache.base import auto_rows
from gnnscale.cache.degree import DegreePolicy
from gnnscale.cache.exchange import LocalExchange
from gnnscale.cache.none import NoCache
from gnnscale.cache.oracle import OraclePolicy
from gnnscale.cache.random import RandomPolicy
from gnnscale.cache.store import (
    FeatureStore,
    build_feature_store,
    owner_map,
    select_cached,
)
from gnnscale.distributed import spawn
from gnnscale.sampling.schedule import PRESAMPLE, Schedule, epoch_batches, sample_seed
from tests import _cache_fns
from tests._cache_fns import make_graph


def _ids(n: int, k: int, seed: int) -> torch.Tensor:
    return torch.randint(0, n, (k,), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("ratio", [0.0, 0.3, 1.0])
def test_gather_equals_indexing(ratio):
    g = make_graph()
    store = build_feature_store(g, DegreePolicy(ratio=ratio))
    assert store.num_cached == int(ratio * g.num_nodes)
    for ids in (_ids(g.num_nodes, 500, 1),                      # duplicates, unsorted
                torch.empty(0, dtype=torch.long),               # empty
                torch.arange(g.num_nodes - 1, -1, -1),          # every id, descending
                torch.tensor([5, 5, 5], dtype=torch.int32)):    # int32 ids, repeated
        rows = store.gather(ids)
        assert rows.shape == (ids.numel(), g.num_features)
        assert torch.equal(rows, g.x[ids.long()])


def test_accounting_is_exact():
    g = make_graph()
    store = build_feature_store(g, RandomPolicy(ratio=0.25), seed=3)
    cached = torch.zeros(g.num_nodes, dtype=torch.bool)
    cached[store.cached_ids] = True
    total_miss = 0
    for seed in (1, 2):
        ids = _ids(g.num_nodes, 200, seed)
        store.gather(ids)
        last = store.last_stats()
        hits = int(cached[ids].sum())
        assert (last["hits"], last["local_hits"], last["misses"]) == (hits, hits, 200 - hits)
        assert last["bytes_host_to_rank"] == (200 - hits) * g.num_features * 4
        assert last["bytes_rank_to_rank"] == 0
        assert last["cache_hit_rate"] == pytest.approx(hits / 200)
        total_miss += 200 - hits
    ep = store.epoch_stats()
    assert ep["requested"] == 400 and ep["misses"] == total_miss and ep["calls"] == 2
    assert ep["bytes_host_to_rank"] == total_miss * store.row_bytes
    store.reset_epoch()
    assert store.epoch_stats()["requested"] == 0


def test_record_visits_counts_every_request():
    g = make_graph()
    store = build_feature_store(g, DegreePolicy(ratio=0.1), record_visits=True)
    a, b = _ids(g.num_nodes, 100, 1), _ids(g.num_nodes, 100, 2)
    store.gather(a)
    store.gather(b)
    assert torch.equal(store.visits, torch.bincount(torch.cat([a, b]), minlength=g.num_nodes))


def test_policies_deterministic_for_a_seed():
    g = make_graph()
    deg = DegreePolicy(ratio=0.1).hotness(g)
    assert torch.equal(deg, g.out_degree().double())
    r = RandomPolicy(ratio=0.1)
    assert torch.equal(r.hotness(g, seed=4), r.hotness(g, seed=4))
    assert not torch.equal(r.hotness(g, seed=4), r.hotness(g, seed=5))
    assert torch.equal(RandomPolicy(seed=7).hotness(g, seed=1), RandomPolicy(seed=7).hotness(g))
    visits = torch.bincount(_ids(g.num_nodes, 1000, 9), minlength=g.num_nodes)
    ora = build_feature_store(g, OraclePolicy(ratio=0.1, visits=visits))
    top = torch.sort(visits.double(), descending=True, stable=True).indices[:30]
    assert torch.equal(ora.cached_ids, top)
    assert NoCache(ratio=0.5).capacity(g.num_nodes, 24) == 0
    assert build_feature_store(g, NoCache()).num_cached == 0


def test_epoch_schedule_is_a_seeded_permutation():
    idx = torch.arange(10, 110)
    a = epoch_batches(idx, 32, seed=1, epoch=0)
    assert [b.numel() for b in a] == [32, 32, 32, 4]
    assert torch.equal(torch.sort(torch.cat(a)).values, idx)
    b = epoch_batches(idx, 32, seed=1, epoch=0)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    c = epoch_batches(idx, 32, seed=1, epoch=1)
    assert not torch.equal(a[0], c[0])
    assert [b.numel() for b in epoch_batches(idx, 32, seed=1, epoch=0, min_size=5)] == [32] * 3
    micro = list(Schedule(idx, batch_size=32, seed=1, slots=2).draws(0))
    assert [(d.step, d.slot) for d in micro] == [(0, 0), (0, 1), (1, 0), (1, 1),
                                                 (2, 0), (2, 1), (3, 0), (3, 1)]
    assert torch.equal(torch.cat([d.items for d in micro[:2]]), a[0])
    seeds = [d.sample_seed for d in micro]  # one per step, its slots' (any split samples alike)
    assert seeds[0::2] == seeds[1::2] and len(set(seeds)) == 4


def test_capacity_respected():
    g = make_graph(n=300, f=6)  # float32 rows of 24 bytes
    assert build_feature_store(g, DegreePolicy(ratio=0.15)).num_cached == 45
    s = build_feature_store(g, DegreePolicy(bytes=24 * 10 + 23))
    assert s.num_cached == 10 and s.cache_bytes <= 24 * 10 + 23
    assert DegreePolicy(bytes=10**9).capacity(300, 24) == 300
    part = torch.arange(300) % 4
    heat = DegreePolicy().hotness(g)
    sets = [select_cached(heat, 100, placement="partitioned", part=part, rank=r)
            for r in range(4)]
    assert [s.numel() for s in sets] == [75] * 4        # capped by the partition's size
    assert all(bool((part[s] == r).all()) for r, s in enumerate(sets))
    owner = owner_map(sets, 300)
    assert bool((owner == part.int()).all())
    with pytest.raises(ValueError, match="disjoint"):
        owner_map([sets[0], sets[0]], 300)
    assert auto_rows(24, device=None, peak_bytes=1000, free_bytes=10_000, reserve=0.1) == 333


def test_clear_errors():
    g = make_graph()
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match=r"cache.ratio must lie in \[0, 1\]"):
            DegreePolicy(ratio=bad)
    with pytest.raises(ValueError, match="below one feature row"):
        build_feature_store(g, DegreePolicy(bytes=23))
    with pytest.raises(ValueError, match="needs a partition map"):
        build_feature_store(g, DegreePolicy(ratio=0.1, placement="partitioned"))
    with pytest.raises(ValueError, match="3 parts but there are 1 ranks"):
        build_feature_store(g, DegreePolicy(ratio=0.1, placement="partitioned"),
                            part=torch.arange(g.num_nodes) % 3)
    with pytest.raises(ValueError, match="placement must be one of"):
        DegreePolicy(placement="sharded")
    with pytest.raises(ValueError, match="needs a CUDA"):
        DegreePolicy(auto=True).capacity(10, 4)
    with pytest.raises(ValueError, match="peak_bytes"):
        auto_rows(4, device=None, peak_bytes=None, free_bytes=1000)
    with pytest.raises(ValueError, match="needs the configured sampler"):
        build_feature_store(g, _presample()(ratio=0.1))
    store = build_feature_store(g, DegreePolicy(ratio=0.1))
    with pytest.raises(IndexError, match=r"ids must lie in \[0, 300\)"):
        store.gather(torch.tensor([0, 300]))


def _presample():
    from gnnscale.cache.presample import PresamplePolicy
    return PresamplePolicy


def test_simulated_ranks_partitioned_exchange():
    g = make_graph()
    world, part = 4, torch.arange(g.num_nodes) % 4
    heat = DegreePolicy().hotness(g)
    sets = [select_cached(heat, 40, placement="partitioned", part=part, rank=r)
            for r in range(world)]
    owner = owner_map(sets, g.num_nodes)
    stores: list[FeatureStore] = []
    ex = LocalExchange(stores)
    topos = [type("T", (), {"rank": r, "world_size": world})() for r in range(world)]
    stores += [FeatureStore(g.x, sets[r], topo=topos[r], owner=owner, exchange=ex)
               for r in range(world)]
    for r, store in enumerate(stores):
        ids = _ids(g.num_nodes, 150, r)
        assert torch.equal(store.gather(ids), g.x[ids])
        own = owner[ids]
        st = store.last_stats()
        assert st["local_hits"] == int((own == r).sum())
        assert st["remote_hits"] == int(((own >= 0) & (own != r)).sum())
        assert st["bytes_rank_to_rank"] == st["remote_hits"] * store.row_bytes
        assert st["bytes_host_to_rank"] == int((own < 0).sum()) * store.row_bytes


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 4])
def test_rank_to_rank_fetch_on_gloo(world):
    outs = spawn(_cache_fns.partitioned_gather, world, 0.1, 3, timeout_s=90)
    n = 300
    owners = {}
    for rank, out in enumerate(outs):
        assert out["ok"] and out["collective"]
        assert len(out["cached"]) == min(int(0.1 * n), n // world)
        assert all(v % world == rank for v in out["cached"])
        owners.update(dict.fromkeys(out["cached"], rank))
        st, ex = out["stats"], out["expect"]
        assert (st["local_hits"], st["remote_hits"], st["misses"]) == \
            (ex["local"], ex["remote"], ex["host"])
        assert st["bytes_rank_to_rank"] == ex["remote"] * out["row_bytes"]
        assert st["bytes_host_to_rank"] == ex["host"] * out["row_bytes"]
    assert len(owners) == sum(len(o["cached"]) for o in outs)     # disjoint caches
    summed = outs[0]["summed"]
    assert summed["requested"] == sum(o["stats"]["requested"] for o in outs)
    assert all(o["summed"] == summed for o in outs)


@pytest.mark.slow
def test_replicated_on_gloo_has_no_rank_to_rank_traffic():
    outs = spawn(_cache_fns.replicated_gather, 2, 0.2, timeout_s=90)
    assert outs[0]["cached"] == outs[1]["cached"] and len(outs[0]["cached"]) == 60
    for out in outs:
        assert out["ok"] and out["stats"]["bytes_rank_to_rank"] == 0


def _sampler():
    from gnnscale.sampling.neighbor import NeighborSampler
    return NeighborSampler([5, 3])


def test_presample_deterministic_and_counts_visits():
    g = make_graph()
    pre = _presample()(ratio=0.2, epochs=2)
    def hot(seed: int) -> torch.Tensor:
        schedule = Schedule(g.train_idx, batch_size=16, seed=seed)
        return pre.hotness(g, schedule=schedule, sampler=_sampler())

    h1, h2 = hot(1), hot(1)
    assert torch.equal(h1, h2) and not torch.equal(h1, hot(2))
    visits = torch.zeros(g.num_nodes, dtype=torch.float64)   # replay PreSC#2 by hand
    for epoch in range(2):
        for step, batch in enumerate(epoch_batches(g.train_idx, 16, 1, epoch, PRESAMPLE)):
            s = sample_seed(1, epoch, step, 0, PRESAMPLE)
            visits[_sampler().sample(g, batch, seed=s).input_nodes] += 1
    assert torch.equal(torch.floor(h1 * 2 + 1e-9), visits)   # tie-break stays below one visit
    assert bool((h1[g.train_idx] >= 0.5).all())               # targets are always inputs


def test_oracle_replays_training_epochs_and_bounds_presample():
    g = make_graph(n=600)
    kw = dict(schedule=Schedule(g.train_idx, batch_size=32, seed=5), sampler=_sampler(), seed=5)
    ora = OraclePolicy(ratio=0.1, epochs=2, first_epoch=1)
    visits = torch.zeros(g.num_nodes, dtype=torch.float64)
    for epoch in (1, 2):
        for step, batch in enumerate(epoch_batches(g.train_idx, 32, 5, epoch)):
            s = sample_seed(5, epoch, step)
            visits[_sampler().sample(g, batch, seed=s).input_nodes] += 1
    assert torch.equal(ora.hotness(g, **kw), visits)
    hit = {}
    for pol in (ora, _presample()(ratio=0.1), RandomPolicy(ratio=0.1)):
        cached = build_feature_store(g, pol, **kw).cached_ids
        hit[pol.name] = float(visits[cached].sum() / visits.sum())
    assert hit["oracle"] >= hit["presample"] > hit["random"]


def test_presample_counts_split_into_shards_sum_exactly():
    """Workers that split the pre-sampling draws (factored's samplers) sum to the same counts,
    and ranking those counts is the policy's hotness."""
    g = make_graph()
    pre = _presample()(ratio=0.2, epochs=2)
    kw = dict(schedule=Schedule(g.train_idx, batch_size=16, seed=3), sampler=_sampler(),
              world_size=2)
    whole = pre.counts(g, **kw)
    parts = [pre.counts(g, shard=(i, 3), **kw) for i in range(3)]
    assert all(p.sum() > 0 for p in parts) and torch.equal(sum(parts), whole)
    assert torch.equal(pre.rank(g, sum(parts)), pre.hotness(g, **kw))
    with pytest.raises(ValueError, match="shard"):
        pre.counts(g, shard=(3, 3), **kw)
    with pytest.raises(ValueError, match="one entry per vertex"):
        pre.rank(g, whole[:-1])


def test_host_tier_mapped_from_disk_is_read_at_random(tmp_path):
    """The feature store advises the kernel that its memory-mapped host table is read at
    random (no read-around: a page per missing row), as the VMA's flags show."""
    from gnnscale.data.pages import advise_random

    np.save(tmp_path / "x.npy", np.zeros((4096, 8), dtype=np.float32))
    x = torch.from_numpy(np.load(tmp_path / "x.npy", mmap_mode="c"))

    def flags() -> list[str]:
        text = Path("/proc/self/smaps").read_text()
        block = text[text.index(str(tmp_path / "x.npy")):]
        return next(line for line in block.splitlines() if line.startswith("VmFlags")).split()
    assert "rr" not in flags()
    FeatureStore(x, torch.empty(0, dtype=torch.long))
    assert "rr" in flags()
    assert not advise_random(torch.empty(0))
