"""Parallel row gather for feature tables: ``gather_rows(table, ids)[i] == table[ids[i]]``."""

from __future__ import annotations

import torch

from gnnscale._native import ops


def gather_rows(table: torch.Tensor, ids: torch.Tensor,
                out: torch.Tensor | None = None) -> torch.Tensor:
    """Rows ``ids`` (int64 or int32, any order, repeats allowed) of ``table`` (CPU, any dtype).

    Multi-threaded with software prefetching; several times faster than ``index_select`` for
    random rows. ``out`` (contiguous, shape ``(len(ids), *table.shape[1:])``, e.g. a pinned
    buffer) receives the rows instead of a new tensor. Out-of-range ids raise a
    ``RuntimeError`` that names the first bad position.
    """
    if not torch.is_tensor(ids):
        ids = torch.as_tensor(ids, dtype=torch.int64)
    if ids.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"ids must be int64 or int32, got {ids.dtype}")
    if out is None:
        return ops().gather_rows(table, ids.reshape(-1))
    return ops().gather_rows_out(table, ids.reshape(-1), out)


def empty_huge(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """An uninitialised CPU tensor whose memory asks for transparent huge pages (Linux, when
    the kernel's THP mode is ``madvise`` or ``always``; otherwise an ordinary tensor).

    Fill it before use: pages are placed on first touch. A feature table copied into one
    gathers random rows faster (fewer TLB misses) than one on 4 KiB pages.
    """
    out = torch.empty(*shape, dtype=dtype)
    ops().advise_huge_pages(out)
    return out
