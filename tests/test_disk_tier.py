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
    tier = DiskTier.of(t, max_run=8, direct=True)
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
