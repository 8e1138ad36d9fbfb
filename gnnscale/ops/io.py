"""Reads of many file ranges with many requests in flight: the disk tier's I/O.

:func:`read_ranges` reads ``lengths[i]`` bytes at file offset ``offsets[i]`` of an open file
into ``buffer[dest[i]:]``, keeping up to ``depth`` requests in flight. It runs the native op
``torch.ops.gnnscale.read_ranges`` (``csrc/io/``: io_uring through raw system calls where the
kernel allows it, else a pool of ``pread`` threads) when the extension has it, and otherwise a
pool of Python threads calling :func:`os.preadv` (which releases the GIL while it waits).
Buffers for ``O_DIRECT`` files come from :func:`aligned_empty`.
:func:`read_rows` is the disk tier's whole gather in one native call
(``torch.ops.gnnscale.read_rows``): the blocks holding the rows planned, read into staging
slots with ``depth`` requests in flight, each request's rows copied out as it completes
(:func:`rows_available` says whether this process has it; the tier otherwise plans in torch and
calls :func:`read_ranges`). Short reads are retried; a read
that ends at the end of the file is short without error (the caller knows which bytes it
needs). Errors are raised as :class:`OSError` naming the offset.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import torch

__all__ = ["aligned_empty", "read_ranges", "read_rows", "rows_available", "native_available",
           "backend"]

_POOLS: dict[tuple[int, int], ThreadPoolExecutor] = {}  # (process, depth): none across forks
_POOL_LOCK = threading.Lock()
#: tests set this to run the Python pool even where the native op is built
FORCE_PYTHON = False
_EXTRA_TRIED = False


def native_available() -> bool:
    """Whether the native op ``torch.ops.gnnscale.read_ranges`` is registered: by the
    extension, or by a library of ``csrc/io`` built alone and named in ``GNNSCALE_IO_LIBRARY``
    (an extension built before ``csrc/io`` existed lacks the op)."""
    global _EXTRA_TRIED
    from gnnscale import ops

    ops.available()  # loads the extension when it is built (a test may load the op alone)
    if hasattr(torch.ops.gnnscale, "read_ranges"):
        return True
    extra = os.environ.get("GNNSCALE_IO_LIBRARY")
    if extra and not _EXTRA_TRIED:
        _EXTRA_TRIED = True
        torch.ops.load_library(extra)
    return hasattr(torch.ops.gnnscale, "read_ranges")


def backend() -> str:
    """The reader :func:`read_ranges` uses here: ``native`` or ``python``."""
    return "native" if native_available() and not FORCE_PYTHON else "python"


def aligned_empty(nbytes: int, align: int = 4096) -> torch.Tensor:
    """An uninitialised ``uint8`` tensor of ``nbytes`` whose first byte is ``align``-aligned
    (an ``O_DIRECT`` read's buffer)."""
    raw = torch.empty(nbytes + align, dtype=torch.uint8)
    skip = (-raw.data_ptr()) % align
    return raw[skip:skip + nbytes]


def _pool(depth: int) -> ThreadPoolExecutor:
    with _POOL_LOCK:
        key = (os.getpid(), depth)
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = ThreadPoolExecutor(depth, thread_name_prefix="gnnscale-io")
        return pool


def _read_some(fd: int, view: memoryview, todo: list[tuple[int, int, int]]) -> int:
    """Reads the ranges ``todo`` (offset, length, destination) one after another."""
    total = 0
    for off, length, dest in todo:
        done = 0
        while done < length:
            got = os.preadv(fd, [view[dest + done:dest + length]], off + done)
            if got == 0:  # the end of the file: the rest of the block does not exist
                break
            done += got
        total += done
    return total


def read_ranges(fd: int, offsets: torch.Tensor, lengths: torch.Tensor, dest: torch.Tensor,
                buffer: torch.Tensor, depth: int = 64, uring: bool = True) -> int:
    """Read every range (``offsets``, ``lengths``: int64 bytes) of ``fd`` into ``buffer``
    (uint8, contiguous) at ``dest``, ``depth`` requests in flight; returns the bytes read.
    ``uring=False`` keeps the native reader on its thread pool."""
    n = int(offsets.numel())
    if n == 0:
        return 0
    if int((dest + lengths).max()) > buffer.numel():
        raise ValueError("read_ranges: a range ends past the buffer")
    depth = max(1, min(int(depth), n))
    if backend() == "native":
        return int(torch.ops.gnnscale.read_ranges(fd, offsets.long().contiguous(),
                                                  lengths.long().contiguous(),
                                                  dest.long().contiguous(), buffer, depth,
                                                  uring))
    view = buffer.numpy().data.cast("B")
    ranges = list(zip(offsets.tolist(), lengths.tolist(), dest.tolist()))
    if depth == 1:
        return _read_some(fd, view, ranges)
    parts = [ranges[k::depth] for k in range(depth)]
    return sum(_pool(depth).map(lambda todo: _read_some(fd, view, todo), parts))


def rows_available() -> bool:
    """Whether :func:`read_rows` runs here: the native op is registered and the Python reader
    is not forced."""
    return backend() == "native" and hasattr(torch.ops.gnnscale, "read_rows")


def read_rows(fd: int, rows: torch.Tensor, offset: int, row_bytes: int, block: int,
              max_run: int, out: torch.Tensor, depth: int = 64, uring: bool = True
              ) -> tuple[int, int]:
    """Row ``i`` of ``out`` (uint8, ``rows.numel() * row_bytes``) = the ``row_bytes`` bytes at
    file offset ``offset + rows[i] * row_bytes``: each ``block`` holding one read once, runs
    of adjacent blocks (at most ``max_run``) as one request, ``depth`` in flight; returns
    ``(requests, bytes read)``. Native only (:func:`rows_available`)."""
    reads, got = torch.ops.gnnscale.read_rows(fd, rows.long().contiguous(), int(offset),
                                              int(row_bytes), int(block), int(max_run),
                                              max(1, int(depth)), bool(uring), out)
    return int(reads), int(got)
