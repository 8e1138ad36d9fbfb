"""The feature store's disk tier (gnnscale/cache/disk.py, gnnscale/ops/io.py, csrc/io/): rows
read from the feature file equal the memory-mapped rows, each shared block is read once, the
counters add up, bad input says what to fix, and every strategy that gathers rows trains the
same batches to the same losses from the disk tier as from the in-memory store."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnscale.cache import disk as disk_mod
from gnnscale.cache.degree import DegreePolicy
from gnnscale.cache.disk import DiskTier, mapped_file, probe
from gnnscale.cache.none import NoCache
from gnnscale.cache.store import FeatureStore, choose_disk
from gnnscale.errors import ConfigError
from gnnscale.ops import io as io_ops

NATIVE_SO = Path("/tmp/gnnscale_io_ext/gnnscale_io_test.so")


def _table(tmp_path: Path, rows: int, cols: int, dtype=np.float32, name: str = "x.npy"
           ) -> torch.Tensor:
    a = np.random.default_rng(rows + cols).standard_normal((rows, cols)).astype(dtype)
    np.save(tmp_path / name, a)
    return torch.from_numpy(np.load(tmp_path / name, mmap_mode="c"))


@pytest.fixture(params=["python", "native"])
def reader(request, monkeypatch):
    """Each test runs on the Python pread pool and, where it is built, the native reader."""
    if request.param == "python":
        monkeypatch.setattr(io_ops, "FORCE_PYTHON", True)
    elif not io_ops.native_available():
        if not NATIVE_SO.exists():
            pytest.skip("the native read_ranges op is not built (csrc/io: see the module doc)")
        torch.ops.load_library(str(NATIVE_SO))
    return request.param


@pytest.mark.parametrize("cols,dtype", [(256, np.float32), (100, np.float32),
                                        (1500, np.float32), (7, np.float16), (3, np.float64)])
def test_rows_equal_the_mapped_table(tmp_path, reader, cols, dtype):
    """Random, repeated, sorted and all rows: row widths below, across and above a block, and
    rows that do not start on a block (the .npy header)."""
    t = _table(tmp_path, 5000, cols, dtype)
    tier = DiskTier.of(t, depth=16)
    assert tier is not None and tier.offset % 64 == 0 and tier.offset > 0
    for ids in (torch.randint(0, 5000, (1500,)), torch.tensor([4999, 0, 0, 17]),
                torch.arange(5000), torch.empty(0, dtype=torch.long)):
        assert torch.equal(tier.read(ids), t[ids])
    tier.close()


def test_a_block_is_read_once_and_adjacent_blocks_together(tmp_path, reader):
    """Four 1 KiB rows share a 4 KiB block: 1,000 rows of 250 adjacent blocks take one
    request per run of ``max_run`` blocks; the counters say so."""
    t = _table(tmp_path, 4000, 256)
    tier = DiskTier.of(t, max_run=8, direct=True, block=4096)
    ids = torch.arange(1000, 2000)
    assert torch.equal(tier.read(ids), t[ids])
    blocks, _ = tier.blocks(ids)
    s = tier.take_stats()
    assert s.disk_rows == 1000 and s.disk_reads == -(-blocks.numel() // 8)
    assert s.disk_bytes_read == blocks.numel() * 4096 and s.disk_time > 0
    spread = torch.arange(0, 4000, 8)  # one row every other block: nothing to share
    tier.read(spread)
    assert tier.take_stats().disk_reads == spread.numel()
    assert tier.take_stats().disk_reads == 0  # taken: zeroed


def test_bytes_read_per_row_byte_by_block_and_alignment(tmp_path, reader):
    """Random 1 KiB rows: 4 KiB blocks read 4 KiB or 8 KiB a row; the device's 512-byte
    logical block reads 1.5 KiB a row of x.npy (rows 128 bytes past a block) and exactly 1 KiB
    a row of a copy whose rows start on a block (its header padded to 4 KiB)."""
    from gnnscale.cache.layout import _aligned_npy

    t = _table(tmp_path, 8000, 256)
    ids = torch.arange(0, 8000, 9)  # no two in one 4 KiB block
    ratios = {}
    for block in (4096, 512):
        tier = DiskTier.of(t, block=block)
        assert torch.equal(tier.read(ids), t[ids])
        s = tier.take_stats()
        ratios[block] = s.disk_bytes_read / (ids.numel() * 1024)
    assert ratios[512] == 1.5 and 4 <= ratios[4096] <= 5
    dst = _aligned_npy(tmp_path / "a.npy", np.dtype(np.float32), (8000, 256))
    dst[:] = t.numpy()
    dst.flush()
    tier = DiskTier.of_file(tmp_path / "a.npy", block=512)
    assert tier.offset == 4096 and torch.equal(tier.read(ids), t[ids])
    assert tier.take_stats().disk_bytes_read == ids.numel() * 1024


@pytest.mark.parametrize("uring", [True, False])
def test_one_call_gather_equals_the_planned_reads(tmp_path, uring):
    """The native one-call gather (``read_rows``: rows copied out of per-request slots as each
    request completes) returns the rows and counts the requests and bytes of the torch-planned
    ``read_ranges`` path, for rows inside a block, across blocks, wider than a run of
    ``max_run`` blocks (a row split over two requests), repeated and out of order."""
    if not io_ops.rows_available():
        pytest.skip("the native read_rows op is not built (python -m gnnscale.native build)")
    for cols, dtype in ((256, np.float32), (7, np.float16), (1500, np.float32)):
        t = _table(tmp_path, 3000, cols, dtype, name=f"x{cols}.npy")
        ids = torch.cat([torch.randint(0, 3000, (700,)), torch.tensor([2999, 0, 0, 5])])
        for block, max_run in ((512, 64), (512, 3), (4096, 1)):
            kw = dict(block=block, max_run=max_run, depth=8, uring=uring)
            fused, planned = DiskTier.of(t, **kw), DiskTier.of(t, fused=False, **kw)
            assert torch.equal(fused.read(ids), t[ids]) and torch.equal(planned.read(ids), t[ids])
            a, b = fused.take_stats(), planned.take_stats()
            assert (a.disk_reads, a.disk_bytes_read, a.disk_rows) == (
                b.disk_reads, b.disk_bytes_read, b.disk_rows), (cols, block, max_run)
            fused.close()
            planned.close()


def test_no_odirect_falls_back_with_one_line(tmp_path, reader, caplog, monkeypatch):
    """A file system that refuses O_DIRECT (open says EINVAL: tmpfs before Linux 6.6, some
    network file systems): the tier reads through the page cache and says so once."""
    import errno

    t = _table(tmp_path, 300, 32)
    real_open = os.open

    def no_direct(path, flags, *args):
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument", path)
        return real_open(path, flags, *args)

    monkeypatch.setattr(disk_mod.os, "open", no_direct)
    disk_mod._WARNED.discard(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="gnnscale.cache.disk"):
        a, b = DiskTier.of(t), DiskTier.of(t)
    assert not a.direct and not b.direct
    lines = [r.getMessage() for r in caplog.records if "O_DIRECT" in r.getMessage()]
    assert len(lines) == 1 and str(tmp_path) in lines[0] and "\n" not in lines[0]
    ids = torch.randint(0, 300, (100,))
    assert torch.equal(a.read(ids), t[ids])
    assert probe(str(tmp_path / "x.npy"), reads=64) > 0


def test_only_a_file_mapping_is_read_from_disk(tmp_path):
    """A table in memory has no file; a mapped table written since it was mapped (so its rows
    are not the file's) is not read from the file either."""
    assert mapped_file(torch.randn(10, 4)) is None
    assert DiskTier.of(torch.randn(10, 4)) is None
    t = _table(tmp_path, 100, 8)
    assert mapped_file(t) == (str(tmp_path / "x.npy"), 128)
    t[0] += 1  # copy-on-write: the file keeps its row
    assert DiskTier.of(t) is None


def test_auto_choice_by_the_budget_and_clear_errors(tmp_path):
    """cache.disk=null picks the tier when the table exceeds the budget, true always (a table
    that is not a file mapping is then one line), false never; a budget below the cache's
    bytes names the smallest that works, at composition too."""
    t = _table(tmp_path, 20000, 256)  # 20 MiB of features
    assert choose_disk(t, NoCache(memory_budget="16MiB")) is not None
    assert choose_disk(t, NoCache(memory_budget="64MiB")) is None
    assert choose_disk(t, NoCache(disk=True, memory_budget="64MiB")) is not None
    assert choose_disk(t, NoCache(disk=False, memory_budget="16MiB")) is None
    assert choose_disk(t, NoCache()) is None  # no budget: the host's memory holds 20 MiB
    with pytest.raises(ValueError, match="^cache.disk=true reads the features from their file"):
        choose_disk(torch.randn(10, 4), NoCache(disk=True))
    with pytest.raises(ValueError, match="give at least cache.memory_budget=33554432"):
        choose_disk(t, NoCache(memory_budget="16MiB"), cache_bytes=32 << 20)
    with pytest.raises(ConfigError, match="give at least cache.memory_budget=33554432"):
        DegreePolicy(bytes=32 << 20, memory_budget="16MiB")
    with pytest.raises(ConfigError, match="cache.disk_block must be a positive multiple of 512"):
        NoCache(disk_block=1000)


def test_store_with_disk_tier_equals_the_memory_store(tmp_path, reader):
    """Cache hits from the cache tier, the rest from the disk: the same rows as the memory-mapped
    store, counted by tier (hits, disk rows, reads, bytes)."""
    t = _table(tmp_path, 3000, 64)
    cached = torch.arange(0, 3000, 3)
    mem = FeatureStore(t, cached)
    on_disk = FeatureStore(t, cached, disk=DiskTier.of(t))
    assert torch.equal(on_disk.cache, mem.cache)
    ids = torch.randperm(3000)[:800]
    assert torch.equal(on_disk.gather(ids), mem.gather(ids))
    s = on_disk.epoch_stats()
    hits = int((ids % 3 == 0).sum())
    assert s["hits"] == hits and s["misses"] == s["disk_rows"] == 800 - hits
    assert s["disk_rate"] == pytest.approx((800 - hits) / 800)
    assert s["rows_per_read"] == pytest.approx(s["disk_rows"] / s["disk_reads"])
    assert s["disk_bytes_read"] == s["disk_bytes_per_row_byte"] * s["disk_rows"] * 256
    assert s["disk_rows_per_s"] > 0
    on_disk.reset_epoch()
    assert on_disk.epoch_stats()["disk_rows"] == 0


# -- every strategy that gathers rows: the same batches and losses from the disk tier ----------
COMMON = ("epochs=2", "model.dropout=0", "eval_every=0", "cache=degree", "cache.ratio=0.2")
STRATEGIES = {
    "data": ("strategy=data", "dist.world_size=2"),
    "split": ("strategy=split", "dist.world_size=2"),
    "factored": ("strategy=factored", "dist.world_size=3", "strategy.samplers=1"),
}


def _losses(tmp_path: Path, name: str, *over: str, dataset: tuple[str, ...] = ()
            ) -> tuple[list[float], list[dict]]:
    from gnnscale.runner.run import run
    from tests._train import TINY, make_cfg

    base = TINY if not dataset else (*dataset, *(o for o in TINY if not
                                                 o.startswith("dataset")))
    out = run(make_cfg(tmp_path, *base, *COMMON, *over, run=name))
    return [h["train_loss"] for h in out["history"]], out["history"]


@pytest.mark.slow
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_strategies_train_equal_from_the_disk_tier(tmp_path, strategy):
    """data and split on 2 ranks, factored on 3 (1 sampler, 2 trainers), the same processed
    graph: with cache.disk=true every row no cache tier holds is read from x.npy by the disk
    tier, and the losses equal the in-memory store's to the bit (same batches, same rows).
    data and split read the next steps' rows ahead (cache.disk_ahead=2) and their gathers take
    rows from those reads; factored's trainers gather on the shared queue's feeder thread,
    ahead of the job in training. data's disk run adds a host tier between the cache tier and
    the disk (cache.host_bytes): the same losses, its hits counted apart."""
    host = ("cache.host_bytes=65536",) if strategy == "data" else ()
    mem, _ = _losses(tmp_path, "mem", *STRATEGIES[strategy], "cache.disk=false")
    disk, hist = _losses(tmp_path, "disk", *STRATEGIES[strategy], "cache.disk=true", *host)
    assert disk == mem
    assert all((h["host_hits"] > 0) == bool(host) for h in hist)
    assert all(h["disk_rows"] > 0 and h["disk_reads"] > 0 for h in hist)
    assert all(h["disk_probe_reads_per_s"] > 0 and h["rows_per_read"] >= 1 for h in hist)
    if strategy != "factored":
        assert all(0 < h["disk_ahead_rows"] <= h["disk_rows"] for h in hist)


@pytest.mark.slow
def test_part_folders_train_equal_from_the_disk_tier(tmp_path):
    """From a partitioned layout (parts=, 2 ranks, data): each rank's disk tier reads its own
    part's x.npy, peers' rows come from their owners' tiers; the same losses as in memory.
    With cache.feature_dtype=bfloat16 each rank reads a rounded copy of its part's rows
    (written once beside the layout) and trains within rounding of float32."""
    from gnnscale.partition.cli import run as partition
    from tests._train import TINY, make_cfg

    over = (*STRATEGIES["data"], f"parts={tmp_path / 'L'}")
    partition(make_cfg(tmp_path, *TINY, *COMMON, *over), log=lambda _m: None)
    mem, _ = _losses(tmp_path, "mem", *over, "cache.disk=false")
    disk, hist = _losses(tmp_path, "disk", *over, "cache.disk=true")
    assert disk == mem and all(h["disk_rows"] > 0 for h in hist)
    half, hist = _losses(tmp_path, "half", *over, "cache.disk=true",
                         "cache.feature_dtype=bfloat16")
    assert half != mem and max(abs(a - b) for a, b in zip(half, mem)) < 0.05
    assert all(h["disk_rows"] > 0 for h in hist)
    assert len(list((tmp_path / "L").glob("derived-features/none-bfloat16-x-*/x.npy"))) == 2


# -- locality layout ----------------------------------------------------------------------------
def _processed_graph(tmp_path: Path):
    from gnnscale.data import processed
    from gnnscale.data.graph import GraphStore

    g = torch.Generator().manual_seed(0)
    n = 4000  # a ring of communities: neighbours are near in id after a shuffle is undone
    src = torch.arange(n).repeat_interleave(6)
    dst = (src + torch.randint(-20, 21, (src.numel(),), generator=g)) % n
    perm = torch.randperm(n, generator=g)  # the dataset's ids scatter the communities
    graph = GraphStore.from_edge_index(
        torch.stack([perm[src], perm[dst]]), n, symmetrize=True,
        x=torch.randn(n, 256, generator=g), y=torch.randint(0, 3, (n,), generator=g),
        train_idx=torch.arange(0, n, 2), val_idx=torch.arange(1, n, 4),
        test_idx=torch.arange(3, n, 4), num_classes=3, name="ring")
    processed.save(graph, tmp_path / "ring" / "processed")
    return processed.load(tmp_path / "ring" / "processed")


@pytest.mark.parametrize("order", ["degree", "bfs"])
def test_locality_order_keeps_ids_and_shares_blocks(tmp_path, reader, order):
    """The ordered copy is written once (a second store reuses it); rows keep their ids; a
    neighbourhood's rows share blocks far more often in BFS order than in the dataset's."""
    from gnnscale.cache.layout import locality_order, rows_per_read

    graph = _processed_graph(tmp_path)
    ranked = locality_order(graph, order)
    assert torch.equal(torch.sort(ranked).values, torch.arange(graph.num_nodes))
    tier = choose_disk(graph.x, NoCache(disk=True, disk_order=order), graph=graph)
    again = choose_disk(graph.x, NoCache(disk=True, disk_order=order), graph=graph)
    assert tier.path == again.path and tier.path != str(tmp_path / "ring/processed/x.npy")
    assert tier.offset == 4096  # rows on block boundaries: none straddles two blocks
    ids = torch.randperm(graph.num_nodes)[:700]
    assert torch.equal(tier.read(ids), graph.x[ids])
    hoods = []
    for seed in range(0, 4000, 400):  # a seed and its 2-hop neighbourhood
        one = graph.indices[graph.indptr[seed]:graph.indptr[seed + 1]].long()
        two = torch.cat([graph.indices[graph.indptr[v]:graph.indptr[v + 1]].long()
                         for v in one.tolist()])
        hoods.append(torch.unique(torch.cat([torch.tensor([seed]), one, two])))
    plain = rows_per_read(tier, hoods)
    laid = rows_per_read(tier, hoods, tier.index)
    if order == "bfs":
        assert laid["rows_per_read"] > 2 * plain["rows_per_read"]
    with pytest.raises(ValueError, match="^cache.disk_order=bfs lays out a whole graph"):
        choose_disk(graph.x, NoCache(disk=True, disk_order="bfs"))


def test_reads_ahead_are_taken_by_the_gathers_and_equal(tmp_path, reader):
    """read_ahead starts each batch's disk reads ``depth`` items early; the gathers take them
    (no second read) and return the same rows; the wait is counted."""
    from gnnscale.sampling.base import MiniBatch

    t = _table(tmp_path, 3000, 64)
    store = FeatureStore(t, torch.arange(0, 3000, 5), disk=DiskTier.of(t))
    batches = [torch.randperm(3000)[:300] for _ in range(6)]
    feed = [(MiniBatch(n_id=b, blocks=[], num_targets=10), 0.0) for b in batches]
    got = []
    for mb, _ in store.read_ahead(feed, depth=2):
        got.append(store.gather(mb.input_nodes))
        assert len(store._pending) <= 2
    assert all(torch.equal(g, t[b]) for g, b in zip(got, batches))
    s = store.epoch_stats()
    assert s["disk_rows"] == sum(int((b % 5 != 0).sum()) for b in batches)  # each read once
    assert s["disk_wait_time"] >= 0 and not store._pending


# -- 16-bit features ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("order", ["none", "bfs"])
def test_16_bit_tiers_hold_half_and_gather_the_rounded_rows(tmp_path, reader, dtype, order):
    """cache.feature_dtype: the processed features copied once at 16 bits beside the folder;
    the cache, host and disk tiers hold half the bytes; a gather returns float32 rows equal to
    the float32 rows rounded to 16 bits."""
    from gnnscale.cache.store import build_feature_store
    from gnnscale.data.graph import GraphStore  # noqa: F401  (the graph's type)

    graph = _processed_graph(tmp_path)
    policy = DegreePolicy(ratio=0.1, disk=True, disk_order=order, feature_dtype=dtype)
    store = build_feature_store(graph, policy)
    half = getattr(torch, dtype)
    assert store.host.dtype == half and store.cache.dtype == half
    assert store.disk.row_bytes == 256 * 2 and store.row_bytes == 512
    ids = torch.randperm(graph.num_nodes)[:900]
    got = store.gather(ids)
    assert got.dtype == torch.float32
    assert torch.equal(got, graph.x[ids].to(half).float())
    again = build_feature_store(graph, policy)  # the copy is reused, not written again
    assert again.disk.path == store.disk.path
    with pytest.raises(ConfigError, match="cache.feature_dtype must be one of"):
        NoCache(feature_dtype="int8")


@pytest.mark.slow
def test_16_bit_run_equals_a_float32_run_fed_the_rounded_values(tmp_path):
    """data, 2 ranks: cache.feature_dtype=bfloat16 trains to the same losses as float32
    training on a saved copy of the graph whose features were rounded to bfloat16."""
    from gnnscale.data import processed

    over = (*STRATEGIES["data"], "cache=none", "cache.ratio=0")
    half, _ = _losses(tmp_path, "half", *over, "cache.feature_dtype=bfloat16")
    folder = next((tmp_path / "data").glob("*/processed"))
    graph = processed.load(folder)
    graph.x = graph.x.to(torch.bfloat16).float()
    processed.save(graph, tmp_path / "rounded" / "processed")
    fed, _ = _losses(tmp_path, "fed", *over, dataset=(
        "dataset=saved", f"dataset.path={tmp_path / 'rounded' / 'processed'}"))
    full, _ = _losses(tmp_path, "full", *over)
    assert half == fed and half != full
