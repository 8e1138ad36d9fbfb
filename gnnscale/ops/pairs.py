"""The pairs domain: ``pair_product`` and its backward (``csrc/pairs/``), the link decoder's
fused gather-and-multiply."""

from __future__ import annotations

import torch

from gnnscale.ops._loader import native


def pair_product(rows: torch.Tensor, src: torch.Tensor, dst: torch.Tensor,
                 reduce: bool) -> torch.Tensor:
    """``rows[src] * rows[dst]`` (``reduce=False``: ``[P, D]``) or its sum over the last
    dimension (``reduce=True``: ``[P]``, the dot products) of a 2-D float32/float64 CPU
    ``rows`` and int64 pair ends, without gathering either end's rows first: the same bits as
    torch's ``(rows[src] * rows[dst])[.sum(-1)]``. Out-of-range ends raise a ``RuntimeError``."""
    return native().pair_product(rows, src, dst, bool(reduce))


def pair_product_backward(grad: torch.Tensor, rows: torch.Tensor, src: torch.Tensor,
                          dst: torch.Tensor, num_threads: int = 0) -> torch.Tensor:
    """The gradient of :func:`pair_product` with respect to ``rows`` (``[N, D]``) given
    ``grad`` (``[P]`` for the dot products, ``[P, D]`` for the products): per row, its
    contributions as a ``src`` end then as a ``dst`` end, each summed in pair order, added;
    autograd's two scatters and their sum, bit for bit, without a ``[P, D]`` temporary. Rows
    are spread over ``num_threads`` (0: ``torch.get_num_threads()``), the result the same."""
    return native().pair_product_backward(grad, rows, src, dst, int(num_threads))
