"""The disk tier: feature rows read from the feature file with many requests in flight.

A feature table memory-mapped from a processed copy (``x.npy``, or a part folder's rows) is
read by page faults, one at a time per thread. :class:`DiskTier` reads the rows of a gather
from the same file instead, as block-aligned ranges with ``depth`` requests in flight
(:func:`gnnscale.ops.io.read_ranges`: io_uring or a ``pread`` pool natively, a pool of
Python ``os.preadv`` threads otherwise), opened ``O_DIRECT`` so the page cache neither holds
nor evicts what the run reads (a file system without ``O_DIRECT``, tmpfs say, falls back to
buffered reads with one line). A gather's rows are mapped to the ``block``-sized blocks that
hold them, each block is read once however many rows share it, and runs of adjacent blocks
are read as one request (up to ``max_run`` blocks). :func:`mapped_file` finds the file and
offset behind a memory-mapped tensor (``/proc/self/maps``), so the tier serves any table the
feature store was given from a processed folder, whole or a part's.

Every read is counted: ``disk_reads`` (requests), ``disk_bytes_read``, ``disk_rows`` and the
seconds spent waiting for them (``disk_time``); :func:`probe` measures the device's random
read rate at the tier's block size and a queue depth, on the file's own device.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gnnscale.ops import io as io_ops

__all__ = ["BLOCK", "DiskTier", "logical_block", "mapped_file", "probe", "probe_sweep"]

BLOCK = 4096
DEPTH = 64
MAX_RUN = 64  # adjacent blocks read by one request: 256 KiB at 4 KiB blocks
log = logging.getLogger(__name__)
_WARNED: set[str] = set()


def mapped_file(table: torch.Tensor) -> tuple[str, int] | None:
    """``(path, offset)``: the file and byte offset holding ``table``'s first element when
    ``table`` (contiguous) is a file mapping covering all of it, else None."""
    if not table.is_contiguous() or table.device.type != "cpu" or table.numel() == 0:
        return None
    ptr = table.data_ptr()
    end = ptr + table.numel() * table.element_size()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                fields = line.split(maxsplit=5)
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                if not lo <= ptr < hi:
                    continue
                path = fields[5].strip() if len(fields) == 6 else ""
                if end > hi or not path.startswith("/") or path.endswith("(deleted)"):
                    return None
                return path, int(fields[2], 16) + ptr - lo
    except OSError:
        return None
    return None


def logical_block(path: str) -> int:
    """The logical block size of the device holding ``path`` (the smallest ``O_DIRECT`` read;
    ``/sys/dev/block/<dev>/queue``, its whole disk's for a partition); 4096 when unknown."""
    dev = os.stat(path).st_dev
    base = f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"
    for queue in (f"{base}/queue", f"{base}/../queue"):
        try:
            with open(f"{queue}/logical_block_size") as f:
                size = int(f.read())
        except (OSError, ValueError):
            continue
        if size >= 512 and size & (size - 1) == 0:
            return size
    return BLOCK


def _open(path: str, direct: bool) -> tuple[int, bool]:
    """An fd of ``path`` (``O_DIRECT`` when asked and the file system allows it) and whether
    it is direct; the fallback is said once per file system in one line."""
    if direct and hasattr(os, "O_DIRECT"):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        except OSError as err:
            if err.errno != errno.EINVAL:
                raise
        else:
            buf = io_ops.aligned_empty(BLOCK)
            try:  # some file systems accept the flag and refuse the read
                os.preadv(fd, [buf.numpy().data], 0)
                return fd, True
            except OSError as err:
                os.close(fd)
                if err.errno != errno.EINVAL:
                    raise
        key = os.path.dirname(path)
        if key not in _WARNED:
            _WARNED.add(key)
            log.warning("disk tier: %s does not allow O_DIRECT (tmpfs?); reading it through "
                        "the page cache", key)
    return os.open(path, os.O_RDONLY), False


@dataclass
class DiskStats:
    """Counters of a disk tier's reads since the last reset."""

    disk_reads: int = 0
    disk_bytes_read: int = 0
    disk_rows: int = 0
    disk_time: float = 0.0


class DiskTier:
    """Rows of a ``[num_rows, num_features]`` table stored row-major at ``offset`` of ``path``,
    read with ``depth`` requests in flight (module docstring)."""

    def __init__(self, path: str, offset: int, num_rows: int, num_features: int,
                 dtype: torch.dtype, *, block: int | None = None, depth: int = DEPTH,
                 direct: bool = True, max_run: int = MAX_RUN, uring: bool = True,
                 index: torch.Tensor | None = None, fused: bool = True) -> None:
        if block is None:  # the device's smallest read: the fewest bytes per random row
            block = logical_block(path)
        if block <= 0 or block % 512:
            raise ValueError(f"the disk tier's block must be a positive multiple of 512 "
                             f"bytes, got {block}")
        if depth < 1 or max_run < 1:
            raise ValueError(f"depth and max_run must be >= 1, got {depth} and {max_run}")
        self.path, self.offset = str(path), int(offset)
        self.num_rows, self.num_features = int(num_rows), int(num_features)
        self.dtype = dtype
        self.itemsize = torch.empty(0, dtype=dtype).element_size()
        self.row_bytes = self.num_features * self.itemsize
        self.block, self.depth, self.max_run, self.uring = block, depth, max_run, uring
        self.want_direct = direct
        #: natively, the whole gather in one call (:func:`gnnscale.ops.io.read_rows`: no
        #: staging buffer of the gather, rows copied out while the other reads are in flight);
        #: False plans the blocks in torch and reads them with ``read_ranges`` (the benchmark's
        #: side-by-side variant, and the only path without the extension)
        self.fused = fused
        #: id -> row of the file, when the file holds the rows in a locality order
        #: (:mod:`gnnscale.cache.layout`); None: row = id
        self.index = None if index is None else torch.as_tensor(index).long()
        if self.index is not None and self.index.shape != (self.num_rows,):
            raise ValueError(f"the disk tier's index must have one entry per row "
                             f"({self.num_rows}), got {tuple(self.index.shape)}")
        self.fd, self.direct = _open(self.path, direct)
        self._pid = os.getpid()
        size = os.fstat(self.fd).st_size
        if self.offset + self.num_rows * self.row_bytes > size:
            os.close(self.fd)
            raise ValueError(f"{self.path} holds {size} bytes, fewer than the table's "
                             f"{self.num_rows} rows of {self.row_bytes} bytes at offset "
                             f"{self.offset}")
        self.stats = DiskStats()
        self._lock = threading.Lock()

    @classmethod
    def of_file(cls, path: str | os.PathLike, dtype: torch.dtype | None = None,
                **kwargs: Any) -> DiskTier:
        """The tier of a whole ``.npy`` file's ``[N, F]`` array (read as ``dtype`` when
        given: a 16-bit float stored as int16)."""
        a = np.load(path, mmap_mode="r", allow_pickle=False)
        if dtype is None:
            dtype = torch.from_numpy(np.empty(0, dtype=a.dtype)).dtype
        return cls(str(path), int(a.offset), a.shape[0], a.shape[1], dtype, **kwargs)

    @classmethod
    def of(cls, table: torch.Tensor, **kwargs: Any) -> DiskTier | None:
        """The tier reading ``table``'s rows from the file it is mapped from (None when it is
        not a file mapping); rows 0 and ``N-1`` are read back and compared, so a table
        written in memory since it was mapped is never served from the file."""
        if table.dim() != 2:
            return None
        where = mapped_file(table)
        if where is None:
            return None
        tier = cls(where[0], where[1], table.shape[0], table.shape[1], table.dtype, **kwargs)
        ends = torch.tensor([0, table.shape[0] - 1])
        if not torch.equal(tier.read(ends, count=False), table[ends]):
            tier.close()
            return None
        return tier

    # -- reading -----------------------------------------------------------------------------
    def blocks(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The sorted distinct blocks holding rows ``ids`` and each row's first byte's
        position in those blocks laid end to end."""
        rows = ids if self.index is None else self.index[ids]
        start = self.offset + rows * self.row_bytes
        first = start // self.block
        last = (start + self.row_bytes - 1) // self.block
        if self.row_bytes <= self.block:  # a row spans one block or two
            blocks = torch.unique(torch.cat([first, last]))
        else:
            span = last - first + 1
            total = int(span.sum())
            base = torch.repeat_interleave(first, span)
            step = torch.arange(total) - torch.repeat_interleave(torch.cumsum(span, 0) - span,
                                                                 span)
            blocks = torch.unique(base + step)
        pos = torch.searchsorted(blocks, first) * self.block + start % self.block
        return blocks, pos

    def requests(self, blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Runs of adjacent ``blocks`` (at most ``max_run`` each): the index of each run's
        first block and its block count."""
        n = blocks.numel()
        idx = torch.arange(n)
        new = torch.ones(n, dtype=torch.bool)
        new[1:] = blocks[1:] != blocks[:-1] + 1
        run_start = torch.cummax(torch.where(new, idx, torch.zeros_like(idx)), 0).values
        new |= (idx - run_start) % self.max_run == 0
        heads = new.nonzero().flatten()
        counts = torch.diff(heads, append=torch.tensor([n]))
        return heads, counts

    def read(self, ids: torch.Tensor, count: bool = True) -> torch.Tensor:
        """``table[ids]`` read from the file (``count``: add to :attr:`stats`)."""
        ids = torch.as_tensor(ids).long().cpu().reshape(-1)
        out_shape = (ids.numel(), self.num_features)
        if ids.numel() == 0:
            return torch.empty(out_shape, dtype=self.dtype)
        if os.getpid() != self._pid:  # a forked child: its own descriptor
            self.fd, self.direct = _open(self.path, self.want_direct)
            self._pid = os.getpid()
        if self.fused and io_ops.rows_available():
            rows = ids if self.index is None else self.index[ids]
            out = torch.empty(ids.numel() * self.row_bytes, dtype=torch.uint8)
            t0 = time.perf_counter()
            reads, got = io_ops.read_rows(self.fd, rows, self.offset, self.row_bytes,
                                          self.block, self.max_run, out, self.depth,
                                          self.uring)
            waited = time.perf_counter() - t0
            result = out.view(self.dtype).view(out_shape)
        else:
            blocks, pos = self.blocks(ids)
            heads, counts = self.requests(blocks)
            buffer = io_ops.aligned_empty(blocks.numel() * self.block, self.block)
            t0 = time.perf_counter()
            got = io_ops.read_ranges(self.fd, blocks[heads] * self.block, counts * self.block,
                                     heads * self.block, buffer, self.depth, self.uring)
            waited = time.perf_counter() - t0
            reads = int(heads.numel())
            result = self._rows(buffer, pos, ids.numel())
        if count:
            with self._lock:
                s = self.stats
                s.disk_reads += reads
                s.disk_bytes_read += int(got)
                s.disk_rows += int(ids.numel())
                s.disk_time += waited
        return result

    def _rows(self, buffer: torch.Tensor, pos: torch.Tensor, n: int) -> torch.Tensor:
        f = self.num_features
        if self.offset % self.itemsize == 0:  # every row starts on an element
            elems = buffer.view(self.dtype)
            windows = torch.as_strided(elems, (elems.numel() - f + 1, f), (1, 1))
            return windows.index_select(0, pos // self.itemsize)
        raw = torch.as_strided(buffer, (buffer.numel() - self.row_bytes + 1, self.row_bytes),
                               (1, 1)).index_select(0, pos)
        return raw.contiguous().view(self.dtype).reshape(n, f)

    # -- accounting --------------------------------------------------------------------------
    def take_stats(self) -> DiskStats:
        """The counters since the last call, and zero them."""
        with self._lock:
            s, self.stats = self.stats, DiskStats()
        return s

    def close(self) -> None:
        """Close the file."""
        if self.fd >= 0 and os.getpid() == self._pid:
            os.close(self.fd)
        self.fd = -1

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass

    def __repr__(self) -> str:
        return (f"DiskTier({self.path!r}, rows={self.num_rows}, row_bytes={self.row_bytes}, "
                f"block={self.block}, depth={self.depth}, direct={self.direct}, "
                f"reader={io_ops.backend()})")


def probe(path: str, *, block: int | None = None, depth: int = DEPTH, reads: int = 2048,
          seed: int = 0, direct: bool = True, uring: bool = True) -> float:
    """Random ``block``-sized aligned reads a second that ``path``'s device answers with
    ``depth`` requests in flight (``reads`` of them, at uniformly random blocks of the file:
    ``O_DIRECT``, so the page cache does not answer; buffered where the file system has no
    ``O_DIRECT``, and then only a cold cache measures the device)."""
    block = logical_block(path) if block is None else block
    fd, _ = _open(path, direct)
    try:
        nblocks = max(1, os.fstat(fd).st_size // block)
        gen = np.random.default_rng(seed)
        picks = torch.from_numpy(gen.integers(0, nblocks, size=reads, dtype=np.int64))
        buffer = io_ops.aligned_empty(reads * block, block)
        t0 = time.perf_counter()
        io_ops.read_ranges(fd, picks * block, torch.full((reads,), block, dtype=torch.long),
                           torch.arange(reads) * block, buffer, depth, uring)
        return reads / max(time.perf_counter() - t0, 1e-9)
    finally:
        os.close(fd)


def probe_sweep(path: str, *, block: int | None = None,
                depths: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128),
                reads: int = 4096, direct: bool = True) -> dict[int, float]:
    """:func:`probe` at each queue depth (a new random set of blocks each, so none is cached
    by the device from the depth before): ``{depth: reads per second}``."""
    return {d: probe(path, block=block, depth=d, reads=max(reads // (1 if d > 4 else 4), 256),
                     seed=d, direct=direct) for d in depths}
