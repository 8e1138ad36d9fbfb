"""Feature-table helpers: the native row gather and tables on transparent huge pages."""

from __future__ import annotations

import torch

from gnnscale.ops.gather import advise_huge_pages, gather_rows

__all__ = ["empty_huge", "gather_rows"]


def empty_huge(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """An uninitialised CPU tensor whose memory asks for transparent huge pages (Linux, when
    the kernel's THP mode is ``madvise`` or ``always``; otherwise an ordinary tensor).

    Fill it before use: pages are placed on first touch. A feature table copied into one
    gathers random rows faster (fewer TLB misses) than one on 4 KiB pages.
    """
    out = torch.empty(*shape, dtype=dtype)
    advise_huge_pages(out)
    return out
