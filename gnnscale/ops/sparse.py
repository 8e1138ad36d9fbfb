"""The sparse domain: a CSR product whose backward uses a transpose built once (pure torch).

torch's own backward of ``torch.sparse.mm(csr, x)`` with respect to ``x`` transposes the
matrix, a sort over its entries, on every call. A caller whose matrix is fixed (a chunk's or a
source group's edges with the bound graph's weights) builds the transpose once and passes both:
:func:`fixed_mm` is ``matrix @ x`` whose backward is ``matrix_t @ grad``. Used by the
full-graph overlap path (:mod:`gnnscale.strategies.fullgraph.overlap`) and by offload's chunk
products (:mod:`gnnscale.strategies.offload.compute`).
"""

from __future__ import annotations

import torch


class FixedProduct(torch.autograd.Function):
    """``matrix @ x`` whose backward is ``matrix_t @ grad`` with the transpose built once:
    torch's own backward of a CSR product transposes the matrix (a sort) on every call."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, matrix: torch.Tensor, matrix_t: torch.Tensor
                ) -> torch.Tensor:
        """``matrix @ x``, keeping the transpose for the backward."""
        ctx.matrix_t = matrix_t
        return torch.sparse.mm(matrix, x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        """``matrix_t @ grad`` for ``x``; none for the matrices."""
        return torch.sparse.mm(ctx.matrix_t, grad), None, None


def fixed_mm(matrix: torch.Tensor, matrix_t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``matrix @ x`` (``matrix``: a CSR matrix, ``matrix_t``: its transpose as CSR) whose
    gradient with respect to ``x`` is ``matrix_t @ grad``; no gradient flows to the
    matrices."""
    return FixedProduct.apply(x, matrix, matrix_t)
