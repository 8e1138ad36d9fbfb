"""The feature store's tiers in order: the cache tier (device memory; on CPU a rank-local copy
standing in for it, under its own budget), the host tier (``cache.host_bytes``: the next hottest
rows, in host memory, pinned on a GPU), then the disk (or the memory-mapped table). Rows equal
the table's, each tier's hits are counted apart, and a budget too small for the tiers names
the smallest that works."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from gnnscale.cache.degree import DegreePolicy
from gnnscale.cache.disk import DiskTier
from gnnscale.cache.store import FeatureStore, build_feature_store, host_tier_ids
from gnnscale.errors import ConfigError


def _table(tmp_path: Path, rows: int, cols: int) -> torch.Tensor:
    a = np.random.default_rng(rows + cols).standard_normal((rows, cols)).astype(np.float32)
    np.save(tmp_path / "x.npy", a)
    return torch.from_numpy(np.load(tmp_path / "x.npy", mmap_mode="c"))


@pytest.mark.parametrize("disk", [False, True])
def test_three_tiers_serve_equal_rows_and_count_hits_per_tier(tmp_path, disk):
    """Ids 0..299 in the cache tier, 300..999 in the host tier, the rest from the disk tier
    (or the mapped table): the rows equal the table's; local, host and disk hits add up to the
    request; the host tier's rows cross to the device like a miss's (bytes_host_to_rank); the
    disk reads ahead skip the host tier's rows."""
    t = _table(tmp_path, 3000, 64)
    store = FeatureStore(t, torch.arange(300), host_ids=torch.arange(300, 1000),
                         disk=DiskTier.of(t) if disk else None)
    assert store.host_tier_bytes == 700 * 256 and torch.equal(store.host_cache, t[300:1000])
    ids = torch.randperm(3000, generator=torch.Generator().manual_seed(0))[:900]
    store.ahead = 1
    for item in store.read_ahead([ids], key=lambda item: item):
        assert torch.equal(store.gather(item), t[ids])
    s = store.epoch_stats()
    local, host = int((ids < 300).sum()), int(((ids >= 300) & (ids < 1000)).sum())
    assert (s["local_hits"], s["host_hits"], s["misses"]) == (local, host, 900 - local - host)
    assert s["hits"] == local + host and s["cache_hit_rate"] == pytest.approx((local + host) / 900)
    assert s["host_hit_rate"] == pytest.approx(host / 900)
    assert s["bytes_host_to_rank"] == (900 - local) * 256
    if disk:
        assert s["disk_rows"] == s["disk_ahead_rows"] == 900 - local - host
    with pytest.raises(ValueError, match="disjoint from cached_ids"):
        FeatureStore(t, torch.arange(300), host_ids=torch.arange(200, 400))


def test_built_tiers_take_the_next_hottest_rows_under_their_budgets(tmp_path):
    """cache=degree with a cache tier of 5% of the vertices and a host tier of 20% of the
    feature bytes: the host tier holds the hottest vertices after the cache tier's, a peer's
    cached rows and (from a part) rows of other owners never; on a CPU the memory budget must
    hold both tiers, said in one line naming the smallest that works."""
    from tests.cache.test_disk_tier import _processed_graph

    graph = _processed_graph(tmp_path)
    n, row = graph.num_nodes, 256 * 4
    host_bytes = n * row // 5
    policy = DegreePolicy(ratio=0.05, host_bytes=host_bytes, disk=True)
    store = build_feature_store(graph, policy)
    heat = policy.hotness(graph)
    ranked = torch.argsort(heat, descending=True, stable=True)
    assert torch.equal(store.cached_ids, ranked[:200])
    assert torch.equal(store.host_ids, ranked[200:200 + n // 5])
    assert store.disk is not None
    ids = torch.arange(0, n, 3)
    assert torch.equal(store.gather(ids), graph.x[ids])
    s = store.epoch_stats()
    assert s["local_hits"] + s["host_hits"] + s["misses"] == ids.numel() and s["host_hits"] > 0
    owner = torch.full((n,), -1)
    owner[ranked[200:210]] = 1
    held = ranked[205:]
    got = host_tier_ids(heat, 20, ranked[:200], owner, held)
    assert torch.equal(got, ranked[210:230])
    need = 200 * row + (n // 5) * row
    small = DegreePolicy(ratio=0.05, host_bytes=host_bytes)
    small.memory_budget = need - 1  # (a budget in a config is at least 16 MiB)
    with pytest.raises(ValueError, match=f"give at least cache.memory_budget={need} "):
        build_feature_store(graph, small)
    with pytest.raises(ConfigError, match="give at least cache.memory_budget=33554432,"):
        DegreePolicy(host_bytes=32 << 20, memory_budget="16MiB")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_typed_tiers_hold_16_bit_rows_and_gather_them_up_cast(dtype):
    """A typed graph under cache.feature_dtype: each featured type's tiers hold the rows
    rounded to 16 bits (half the bytes), gathers return them as float32, cache hits and
    misses alike; cache.host_bytes is one line on a typed graph."""
    from gnnscale.cache.store import build_typed_store
    from tests._typed_fns import make_typed_graph

    graph = make_typed_graph()
    name = str(dtype).replace("torch.", "")
    store = build_typed_store(graph, DegreePolicy(ratio=0.3, feature_dtype=name))
    for t, x in graph.features.items():
        assert store.stores[t].host.dtype == dtype and store.stores[t].num_cached > 0
        assert store.stores[t].row_bytes == x.shape[1] * 2
    ids = torch.arange(graph.num_nodes)
    got = store.gather(ids)
    for k, t in enumerate(graph.node_types):
        if t in graph.features:
            want = graph.features[t][got.local[got.node_type == k]].to(dtype).float()
            assert got.features[t].dtype == torch.float32 and torch.equal(got.features[t], want)
    with pytest.raises(ValueError, match="^cache.host_bytes is not supported on typed graphs"):
        build_feature_store(graph, DegreePolicy(ratio=0.3, host_bytes=4096))


def test_a_parts_rows_are_rounded_once_into_a_copy_beside_the_layout(tmp_path):
    """cache.feature_dtype on a part folder's rows (parts=): a bfloat16 copy of the part's
    x.npy written once under the layout's derived-features/ (a second store maps the same
    file), read by the disk tier, gathered as the rounded float32 rows by global id."""
    from gnnscale.cache.disk import mapped_file
    from gnnscale.cache.store import _feature_dtype
    from gnnscale.partition.part_files import RowView

    folder = tmp_path / "L" / "part-0"
    folder.mkdir(parents=True)
    rows = _table(folder, 50, 64)
    held = torch.arange(0, 100, 2)
    view = RowView(rows, held, 100, "x", str(folder))
    policy = DegreePolicy(feature_dtype="bfloat16")
    out_dtype, half = _feature_dtype(view, policy, None)
    again = _feature_dtype(view, policy, None)[1]
    where = mapped_file(half.rows)
    assert out_dtype == torch.float32 and half.rows.dtype == torch.bfloat16
    assert where is not None and where == mapped_file(again.rows) and view.rows is rows
    assert Path(where[0]).parent.parent == tmp_path / "L" / "derived-features"
    store = FeatureStore(half, torch.empty(0, dtype=torch.long), out_dtype=out_dtype,
                         disk=DiskTier.of(half.rows))
    ids = held[torch.randperm(50)[:20]]
    want = rows[view.positions(ids)].to(torch.bfloat16).float()
    assert torch.equal(store.gather(ids), want) and store.epoch_stats()["disk_rows"] == 20


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_byte_budget_holds_the_rows_as_stored(tiny_graph, dtype):
    """cache.bytes counts a row at the width the tiers hold it: in 16 bits the same budget
    caches twice the rows of float32 (it cached the float32 count before)."""
    budget = 100 * int(tiny_graph.x.shape[1]) * 4  # 100 float32 rows
    full = build_feature_store(tiny_graph, DegreePolicy(bytes=budget))
    half = build_feature_store(tiny_graph, DegreePolicy(bytes=budget, feature_dtype=dtype))
    assert full.num_cached == 100 and half.num_cached == 200
    assert half.cache_bytes == full.cache_bytes
