"""Link decoders: a pair of node embeddings ``(z_u, z_v)`` becomes one logit."""

from __future__ import annotations

import torch
from torch import nn


class DotDecoder(nn.Module):
    """``<z_u, z_v>`` (the graph auto-encoder's inner product); no parameters."""

    def forward(self, zu: torch.Tensor, zv: torch.Tensor) -> torch.Tensor:
        """One logit per row pair."""
        return (zu * zv).sum(-1)


class MLPDecoder(nn.Module):
    """An MLP on the Hadamard product ``z_u * z_v`` (OGB's ``LinkPredictor``): ``layers``
    linear maps, ReLU between them, ``hidden`` wide, one output."""

    def __init__(self, dim: int, hidden: int = 256, layers: int = 2) -> None:
        super().__init__()
        widths = [dim] + [hidden] * (layers - 1) + [1]
        self.lins = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))

    def forward(self, zu: torch.Tensor, zv: torch.Tensor) -> torch.Tensor:
        """One logit per row pair."""
        h = zu * zv
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
