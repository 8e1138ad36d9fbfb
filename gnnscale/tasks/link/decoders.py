"""Link decoders: a pair of node embeddings ``(z_u, z_v)`` becomes one logit.

Each decoder also scores pairs straight from a table of rows (:meth:`score_pairs`: ``rows``
and the pairs' row indices), fused on the CPU: the pair's two rows are gathered and multiplied
in one native pass (:func:`gnnscale.ops.pairs.pair_product`) and the backward scatters the
gradient into the table without a ``[pairs, dim]`` temporary; the logits and gradients are the
bits of ``forward(rows[src], rows[dst])`` and its autograd.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from gnnscale.ops import available
from gnnscale.ops.pairs import pair_product as _native_product
from gnnscale.ops.pairs import pair_product_backward


class _PairProduct(torch.autograd.Function):
    """``rows[src] * rows[dst]`` (or its last-dimension sum), native forward and backward."""

    @staticmethod
    def forward(ctx, rows: torch.Tensor, src: torch.Tensor, dst: torch.Tensor,  # noqa: ANN001
                reduce: bool) -> torch.Tensor:
        ctx.save_for_backward(rows, src, dst)
        return _native_product(rows, src, dst, reduce)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor):  # noqa: ANN001, ANN205
        rows, src, dst = ctx.saved_tensors
        return pair_product_backward(grad.contiguous(), rows, src, dst), None, None, None


def fused(rows: torch.Tensor) -> bool:
    """Whether :func:`pair_product` takes the native path for ``rows`` (2-D float32/float64
    on the CPU, the extension built)."""
    return (rows.device.type == "cpu" and rows.dim() == 2
            and rows.dtype in (torch.float32, torch.float64) and available())


def pair_product(rows: torch.Tensor, src: torch.Tensor, dst: torch.Tensor,
                 reduce: bool) -> torch.Tensor:
    """``rows[src] * rows[dst]``, summed over the last dimension when ``reduce``: fused where
    :func:`fused` says so, else torch's own formulation (same bits either way)."""
    if fused(rows):
        return _PairProduct.apply(rows, src.long().cpu(), dst.long().cpu(), bool(reduce))
    out = rows[src.to(rows.device)] * rows[dst.to(rows.device)]
    return out.sum(-1) if reduce else out


class DotDecoder(nn.Module):
    """``<z_u, z_v>`` (the graph auto-encoder's inner product); no parameters."""

    def forward(self, zu: torch.Tensor, zv: torch.Tensor) -> torch.Tensor:
        """One logit per row pair."""
        return (zu * zv).sum(-1)

    def score_pairs(self, rows: torch.Tensor, src: torch.Tensor, dst: torch.Tensor
                    ) -> torch.Tensor:
        """``forward(rows[src], rows[dst])``, fused."""
        return pair_product(rows, src, dst, reduce=True)


class MLPDecoder(nn.Module):
    """An MLP on the Hadamard product ``z_u * z_v`` (OGB's ``LinkPredictor``): ``layers``
    linear maps, ReLU between them, ``hidden`` wide, one output."""

    def __init__(self, dim: int, hidden: int = 256, layers: int = 2) -> None:
        super().__init__()
        widths = [dim] + [hidden] * (layers - 1) + [1]
        self.lins = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))

    def forward(self, zu: torch.Tensor, zv: torch.Tensor) -> torch.Tensor:
        """One logit per row pair."""
        return self._mlp(zu * zv)

    def score_pairs(self, rows: torch.Tensor, src: torch.Tensor, dst: torch.Tensor
                    ) -> torch.Tensor:
        """``forward(rows[src], rows[dst])``, the Hadamard product fused."""
        return self._mlp(pair_product(rows, src, dst, reduce=False))

    def _mlp(self, h: torch.Tensor) -> torch.Tensor:
        for i, lin in enumerate(self.lins):
            h = lin(h)
            if i < len(self.lins) - 1:
                h = torch.relu(h)
        return h.reshape(-1)


def make_decoder(kind: str, dim: int, hidden: int = 256, layers: int = 2) -> nn.Module:
    """``dot`` or ``mlp``."""
    if kind == "dot":
        return DotDecoder()
    if kind == "mlp":
        return MLPDecoder(dim, hidden, layers)
    raise ValueError(f"task.decoder must be dot or mlp, got {kind!r}")
