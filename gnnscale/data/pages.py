"""Pages of memory-mapped arrays given back after a chunked read, so a check stays in bounds.

A check that reads a memory-mapped array a chunk at a time (the CSC and type checks of
:class:`gnnscale.data.graph.GraphStore`, the finiteness checks) still pages the whole file
into this process's resident set (RSS counts mapped file pages it touched) unless the pages
of each chunk are dropped once read. :func:`release` does that with
``madvise(MADV_DONTNEED)`` for the arrays registered with :func:`mapped`: a file mapping whose
pages this process did not write (a dropped page is read again from the page cache on the
next access), never anonymous memory. Registration is explicit and scoped:
:func:`gnnscale.data.processed.load` registers the arrays it maps copy-on-write while the
graph is built and checked (nothing has written them yet), the staging folder
(:mod:`gnnscale.data.bounded`) the files it maps shared. Any other tensor passes through
:func:`release` untouched: one dict lookup. :func:`advise_random` marks a table read at random
(``MADV_RANDOM``: the feature store's host tier), so a gather reads a page per missing row,
not the readahead window.
"""

from __future__ import annotations

import ctypes
import mmap
import sys
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import numpy as np
import torch

#: data address -> (the mapped array, weakly; its bytes): the arrays whose pages may be dropped
_MAPPED: dict[int, tuple[weakref.ref, int]] = {}
_MADV_DONTNEED = 4
_MADV_RANDOM = 1  # <sys/mman.h> on Linux
_LIBC = None


def mapped(tensor: torch.Tensor, array: np.ndarray) -> None:
    """Register ``tensor`` (``torch.from_numpy(array)``, ``array`` a file mapping this process
    has not written) so that :func:`release` may drop its pages."""
    if isinstance(array, np.memmap) and array.nbytes:
        _MAPPED[tensor.data_ptr()] = (weakref.ref(array), int(array.nbytes))


def forget(tensor: torch.Tensor) -> None:
    """Undo :func:`mapped` for ``tensor``."""
    _MAPPED.pop(tensor.data_ptr(), None)


@contextmanager
def releasing(pairs: Iterable[tuple[torch.Tensor, np.ndarray]]) -> Iterator[None]:
    """:func:`mapped` for each ``(tensor, array)`` for the duration of the block only."""
    pairs = list(pairs)
    for t, a in pairs:
        mapped(t, a)
    try:
        yield
    finally:
        for t, _ in pairs:
            forget(t)


def release(tensor: torch.Tensor | None, start: int = 0, stop: int | None = None) -> None:
    """Drop from this process's RSS the pages holding rows ``[start, stop)`` of ``tensor``
    (all of it by default) when it is a registered file mapping; otherwise nothing."""
    if tensor is None or not _MAPPED:
        return
    entry = _MAPPED.get(tensor.data_ptr())
    if entry is None:
        return
    array = entry[0]()
    if array is None or array.ctypes.data != tensor.data_ptr():  # gone: the address is stale
        _MAPPED.pop(tensor.data_ptr(), None)
        return
    rows = tensor.shape[0] if tensor.dim() else 1
    stop = rows if stop is None else min(stop, rows)
    if stop <= start:
        return
    row_bytes = entry[1] // max(rows, 1)
    base, page = tensor.data_ptr(), mmap.PAGESIZE
    lo = (base + start * row_bytes) // page * page
    hi = min(-(-(base + stop * row_bytes) // page) * page, -(-(base + entry[1]) // page) * page)
    libc = _libc()
    if libc and hi > lo:
        libc.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), _MADV_DONTNEED)


def advise_random(table: torch.Tensor) -> bool:
    """Tell the kernel that ``table``'s pages are read at random (``madvise(MADV_RANDOM)``):
    a host table memory-mapped from a processed copy larger than memory is then read a page
    per missing row, instead of the read-around and readahead windows meant for sequential
    reads, which read the whole 24.6 GB table to gather 20,000 rows (docs/benchmarks.md, "A
    graph larger than memory"). No effect on a table in anonymous memory; False where
    ``madvise`` is not available."""
    if table.device.type != "cpu" or not table.numel() or not sys.platform.startswith("linux"):
        return False
    libc = _libc()
    if not libc:
        return False
    page = mmap.PAGESIZE
    start = table.data_ptr() // page * page
    end = table.data_ptr() + table.numel() * table.element_size()
    return libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_RANDOM) == 0


def _libc():
    global _LIBC
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
            _LIBC.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        except (OSError, AttributeError):
            _LIBC = False
    return _LIBC
