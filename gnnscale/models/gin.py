"""GIN (Xu et al.) from PyG's GINConv with a two-layer MLP.

Split: ``aggregate`` sums ``x[u]`` over the edges; ``update`` is ``nn((1 + eps) x_v + agg)``.
Reordered, the MLP's first Linear (weight only) moves before the sum, exact since
``W((1 + eps) x_v + sum x_u) = (1 + eps) W x_v + sum W x_u``; its bias and the rest of the MLP
stay in ``update``.

Weighted blocks (``block.edge_weight``, the random-walk sampler's visit counts): the sum weighs
``x[u]`` by ``w_uv``, i.e. the neighbourhood as a multiset with each vertex as often as the
walks visited it (GIN's sum over a multiset).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch_geometric.nn import GINConv

from gnnscale.models.base import GNN
from gnnscale.models.schemas import GINConfig
from gnnscale.sampling.base import Block


class GIN(GNN):
    """GIN with a two-layer MLP per conv and, with ``train_eps``, a learned ``eps``."""

    schema = GINConfig

    def __init__(self, in_channels: int, out_channels: int, train_eps: bool = True,
                 **kw: Any) -> None:
        self.train_eps = train_eps
        super().__init__(in_channels, out_channels, **kw)

    def make_conv(self, layer: int, in_dim: int, out_dim: int) -> GINConv:
        """A GINConv on ``Linear, ReLU, Linear``."""
        mlp = nn.Sequential(nn.Linear(in_dim, out_dim), nn.ReLU(), nn.Linear(out_dim, out_dim))
        return GINConv(mlp, train_eps=self.train_eps)

    def edge_weight(self, layer: int, block: Block) -> torch.Tensor | None:
        """The block's own weights (visit counts), else None: a plain sum."""
        return block.edge_weight

    def pre_linear(self, layer: int) -> nn.Module:
        """The MLP's first Linear."""
        return self.convs[layer].nn[0]

    def conv_update(self, layer: int, agg: torch.Tensor, x_dst: torch.Tensor,
                    dst_ids: torch.Tensor | None = None,
                    z_dst: torch.Tensor | None = None) -> torch.Tensor:
        """``nn((1 + eps) x_v + agg)``; reordered, the first Linear's bias, then the rest of the
        MLP."""
        conv = self.convs[layer]
        if z_dst is None:
            return conv.nn((1 + conv.eps) * x_dst + agg)
        first = conv.nn[0]
        h = (1 + conv.eps) * z_dst + agg
        return conv.nn[1:](h if first.bias is None else h + first.bias)
