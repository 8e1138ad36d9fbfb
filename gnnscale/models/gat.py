"""GAT (Velickovic et al.), multi-head, from PyG's GATConv.

Hidden layers concatenate ``heads`` heads of ``hidden // heads`` channels; the output layer
averages ``out_heads`` heads. GAT cannot be split into aggregate and update (the softmax
normalises over all of a destination's in-edges), so vertex-cuts refuse it. Blocks with edge
weights (``sampler=random_walk``) are refused too: attention learns its own edge weights, and
GATConv takes edge features only through a learned ``edge_dim`` projection, not as weights.

``edge_dim`` (``model.edge_dim``: ``auto`` is the dataset's edge feature width, filled in when
the model is built) makes every GATConv read the block's edge features in its attention scores
(``block.edge_attr``, gathered by the strategy); self loops get the mean of a destination's
in-edge features (GATConv's ``fill_value``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch_geometric.nn import GATConv

from gnnscale.models.base import GNN
from gnnscale.models.schemas import GATConfig
from gnnscale.sampling.base import Block


class GAT(GNN):
    """Multi-head GAT: hidden layers concatenate ``heads`` heads, the last averages
    ``out_heads``."""

    #: Attention weighs each edge by a softmax over all of the destination's in-edges, so a
    #: partial aggregate over some of them is not a summand of the whole: edge-cuts only.
    schema = GATConfig

    def __init__(self, in_channels: int, out_channels: int, heads: int = 4, out_heads: int = 1,
                 attn_dropout: float = 0.0, hidden: int = 256, edge_dim: int | None = None,
                 **kw: Any) -> None:
        if edge_dim == "auto":
            raise ValueError("GAT(edge_dim='auto'): give the dataset's edge feature width (the "
                             "runner fills model.edge_dim=auto in)")
        GATConfig(hidden=hidden, heads=heads, edge_dim=edge_dim).check()
        self.heads, self.out_heads, self.attn_dropout = heads, out_heads, attn_dropout
        self.edge_dim = None if edge_dim is None else int(edge_dim)
        super().__init__(in_channels, out_channels, hidden=hidden, **kw)

    def options(self) -> dict:
        """The base options and ``edge_dim``."""
        return {**super().options(), "edge_dim": self.edge_dim}

    def make_conv(self, layer: int, in_dim: int, out_dim: int) -> GATConv:
        """A GATConv: ``heads`` concatenated heads in hidden layers, ``out_heads`` averaged in the
        last."""
        if layer == self.num_layers - 1:
            return GATConv(in_dim, out_dim, heads=self.out_heads, concat=False,
                           dropout=self.attn_dropout, edge_dim=self.edge_dim)
        return GATConv(in_dim, out_dim // self.heads, heads=self.heads, concat=True,
                       dropout=self.attn_dropout, edge_dim=self.edge_dim)

    sparse_conv = False  # attention weighs each edge: messages per edge

    def conv(self, layer: int, x: torch.Tensor, block: Block) -> torch.Tensor:
        """The base conv, refusing weighted blocks and attention dropout under keyed dropout."""
        if block.edge_weight is not None:
            raise ValueError(self.why_not_weighted({}))
        if self.training and self.attn_dropout > 0 and self.dropout_key is not None:
            raise ValueError("model.attn_dropout > 0 drops edges with torch's generator, which "
                             "replicas cannot agree on: set model.attn_dropout=0 with a "
                             "strategy that keys dropout (fullgraph)")
        return super().conv(layer, x, block)
