"""The sparse domain: a CSR product whose backward uses a transpose built once (pure torch).

torch's own backward of ``torch.sparse.mm(csr, x)`` with respect to ``x`` transposes the
matrix, a sort over its entries, on every call. A caller whose matrix is fixed (a chunk's or a
source group's edges with the bound graph's weights) builds the transpose once and passes both:
:func:`fixed_mm` is ``matrix @ x`` whose backward is ``matrix_t @ grad``. Used by the
full-graph overlap path (:mod:`gnnscale.strategies.fullgraph.overlap`) and by offload's chunk
products (:mod:`gnnscale.strategies.offload.compute`).

When ``x`` is larger than the host's last-level cache, a product reads its rows at random from
memory. :func:`column_blocks` cuts the matrix by ranges of ``x``'s rows, each range small
enough to stay in cache while its edges read it, and :func:`blocked_mm` sums the blocks'
products into one output (the backward stays one product with the whole transpose: it reads
the output's gradient, the smaller side).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import torch


class FixedProduct(torch.autograd.Function):
    """``matrix @ x`` whose backward is ``matrix_t @ grad`` with the transpose built once:
    torch's own backward of a CSR product transposes the matrix (a sort) on every call."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, matrix: torch.Tensor, matrix_t: torch.Tensor
                ) -> torch.Tensor:
        """``matrix @ x``, keeping the transpose for the backward."""
        ctx.matrix_t = matrix_t
        return torch.sparse.mm(matrix, x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        """``matrix_t @ grad`` for ``x``; none for the matrices."""
        return torch.sparse.mm(ctx.matrix_t, grad), None, None


def fixed_mm(matrix: torch.Tensor, matrix_t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``matrix @ x`` (``matrix``: a CSR matrix, ``matrix_t``: its transpose as CSR) whose
    gradient with respect to ``x`` is ``matrix_t @ grad``; no gradient flows to the
    matrices."""
    return FixedProduct.apply(x, matrix, matrix_t)


@functools.cache
def llc_bytes() -> int:
    """The host's last-level cache in bytes (sysfs: the highest cache level of cpu0), or
    32 MiB where it cannot be read."""
    best = (0, 32 << 20)
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            text = (index / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        if kind == "INSTRUCTION" or not text:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1], 1)
        size = int(text.rstrip("KMG")) * scale
        if level > best[0]:
            best = (level, size)
    return best[1]


def block_rows(num_rows: int, width: int, itemsize: int, device: torch.device,
               edges: int, out_rows: int) -> int:
    """Rows of ``x`` (``num_rows x width``) per column block of a product of ``edges``
    entries into ``out_rows`` rows: half the last-level cache's worth on a CPU when ``x`` does
    not fit in it, else every row (one block; accelerators are never blocked).

    Each block adds its own output (``out_rows x width``) into the sum, so blocking pays only
    while the blocks are few against the entries a row sums: at most one block per 8 entries
    per output row (measured on the products-like graph's rank tables, 61k x 245k, 3.1M
    entries: 4-6 blocks 1.4-2.0x faster at widths 64-100, 15 blocks 2x slower at 256)."""
    if device.type != "cpu" or width <= 0 or out_rows <= 0:
        return num_rows
    row_bytes = width * itemsize
    if num_rows * row_bytes <= llc_bytes():
        return num_rows
    rows = max(1, (llc_bytes() // 2) // row_bytes)
    blocks = -(-num_rows // rows)
    if blocks * 8 * out_rows > edges:
        return num_rows
    return -(-num_rows // blocks)  # the rows spread evenly over the blocks


def column_blocks(matrix: torch.Tensor, rows: int) -> list[tuple[torch.Tensor, int, int]]:
    """``matrix`` (CSR, ``n x m``) cut into column ranges of ``rows``: ``(block, start,
    stop)`` with ``block`` the CSR ``n x (stop - start)`` of the entries whose column is in
    ``[start, stop)``, their order within each row kept."""
    n, m = matrix.shape
    crow, col, val = matrix.crow_indices(), matrix.col_indices(), matrix.values()
    row = torch.repeat_interleave(torch.arange(n, device=col.device), crow.diff())
    out = []
    for start in range(0, m, rows):
        stop = min(m, start + rows)
        keep = (col >= start) & (col < stop)
        r = row[keep]
        c = torch.zeros(n + 1, dtype=crow.dtype, device=crow.device)
        c[1:] = torch.bincount(r, minlength=n).cumsum(0)
        block = torch.sparse_csr_tensor(c, (col[keep] - start).to(col.dtype), val[keep],
                                        (n, stop - start), check_invariants=False)
        out.append((block, start, stop))
    return out


class BlockedProduct(FixedProduct):
    """``sum over blocks of block @ x[start:stop]`` (:func:`column_blocks`), whose backward is
    :class:`FixedProduct`'s: ``matrix_t @ grad`` with the whole transpose built once."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, blocks: list, matrix_t: torch.Tensor) -> torch.Tensor:
        """The blocks' products summed in block order."""
        ctx.matrix_t = matrix_t
        out = None
        for block, start, stop in blocks:
            part = torch.sparse.mm(block, x[start:stop])
            out = part if out is None else out.add_(part)
        return out


def blocked_mm(blocks: list, matrix_t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``matrix @ x`` from ``matrix``'s :func:`column_blocks`, its gradient with respect to
    ``x`` ``matrix_t @ grad``; no gradient flows to the matrices."""
    return BlockedProduct.apply(x, blocks, matrix_t)
