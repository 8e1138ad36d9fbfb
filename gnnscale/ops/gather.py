"""The gather domain: ``gather_rows`` and ``advise_huge_pages`` (``csrc/gather/``)."""

from __future__ import annotations

import torch

from gnnscale.ops._loader import native


def gather_rows(table: torch.Tensor, ids: torch.Tensor, out: torch.Tensor | None = None,
                num_threads: int = 0) -> torch.Tensor:
    """Rows ``ids`` (int64 or int32, any order, repeats allowed) of ``table`` (CPU, any dtype).

    Multi-threaded with software prefetching. ``out`` (contiguous, shape
    ``(len(ids), *table.shape[1:])``, e.g. a pinned buffer) receives the rows instead of a new
    tensor. ``num_threads``: threads to use, the caller included (0: ``torch.get_num_threads()``
    of the calling thread). Out-of-range ids raise a ``RuntimeError`` that names the first bad
    position.
    """
    if not torch.is_tensor(ids):
        ids = torch.as_tensor(ids, dtype=torch.int64)
    if ids.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"ids must be int64 or int32, got {ids.dtype}")
    if out is None:
        return native().gather_rows(table, ids.reshape(-1), int(num_threads))
    return native().gather_rows_out(table, ids.reshape(-1), out, int(num_threads))


def advise_huge_pages(t: torch.Tensor) -> bool:
    """Ask for transparent huge pages on ``t``'s memory (a hint); True when the kernel took it."""
    return bool(native().advise_huge_pages(t))
