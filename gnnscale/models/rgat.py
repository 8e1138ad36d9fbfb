"""R-GAT (Busbridge et al., 2019) from PyG's RGATConv, on typed graphs.

Layer 0 reads the typed input's rows (:class:`~gnnscale.models.typed.TypedGNN`: a linear map
per featured node type, an embedding table per featureless one, ``hidden`` wide). Each conv
transforms an edge's source and destination rows by its relation's weight (``num_bases`` > 0:
a combination of that many shared bases), scores the edge by additive self-attention
(``q``, ``k``, and with ``edge_dim`` the edge's features through ``lin_edge`` and ``e``), takes
a softmax over all of the destination's in-edges (``attention=across-relation``) or over its
edges of each relation (``within-relation``) and sums the weighted messages. Hidden layers
concatenate ``heads`` heads of ``hidden // heads`` channels, the output layer averages
``out_heads``. As in RGATConv there is no root weight: a vertex sees its own row only through
the edges into it (reverse edge types give the graph's).

``edge_dim`` (``model.edge_dim``: ``auto`` is the dataset's edge feature width, filled in when
the model is built) makes every conv read the block's edge features (``block.edge_attr``, which
the strategy gathers by the edges' ids): the graph's edge types must carry features of one
width. R-GAT is not split into aggregate and update (the softmax spans a vertex's in-edges):
it trains under the strategies that run each conv whole on a mini-batch (data, factored);
weighted blocks are refused. RGATConv's ``mod`` variants are not offered: the parameters only
they read are frozen.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch_geometric.nn import RGATConv

from gnnscale.models.schemas import RGATConfig
from gnnscale.models.typed import TypedGNN
from gnnscale.sampling.base import Block

#: RGATConv's parameters that only its ``mod`` variants read (``mod=None`` here): zeroed and
#: frozen, so data-parallel reducers, which expect a gradient for every trained parameter,
#: skip them
UNUSED = ("w", "l1", "b1", "l2", "b2")


class RGAT(TypedGNN):
    """Multi-head R-GAT over a typed graph's relations, with a typed input layer."""

    schema = RGATConfig

    def __init__(self, in_channels: int, out_channels: int, heads: int = 4, out_heads: int = 1,
                 num_bases: int = 0, attention: str = "across-relation",
                 attn_dropout: float = 0.0, hidden: int = 256, edge_dim: int | None = None,
                 **kw: Any) -> None:
        if edge_dim == "auto":
            raise ValueError("RGAT(edge_dim='auto'): give the dataset's edge feature width (the "
                             "runner fills model.edge_dim=auto in)")
        RGATConfig(hidden=hidden, heads=heads, out_heads=out_heads, num_bases=num_bases,
                   attention=attention, attn_dropout=attn_dropout, edge_dim=edge_dim,
                   residual=bool(kw.get("residual", False))).check()
        self.heads, self.out_heads, self.num_bases = heads, out_heads, num_bases
        self.attention, self.attn_dropout = attention, attn_dropout
        self.edge_dim = None if edge_dim is None else int(edge_dim)
        super().__init__(in_channels, out_channels, hidden=hidden, **kw)

    def options(self) -> dict[str, Any]:
        """The shared options and ``edge_dim``."""
        return {**super().options(), "edge_dim": self.edge_dim}

    def relation_conv(self, layer: int, in_dim: int, out_dim: int) -> nn.Module:
        """An RGATConv: ``heads`` concatenated heads in hidden layers, ``out_heads`` averaged
        in the last."""
        last = layer == self.num_layers - 1
        heads = self.out_heads if last else self.heads
        conv = RGATConv(in_dim, out_dim if last else out_dim // heads, self.num_relations,
                        num_bases=self.num_bases or None, heads=heads, concat=not last,
                        attention_mechanism=self.attention, dropout=self.attn_dropout,
                        edge_dim=self.edge_dim)
        with torch.no_grad():  # only its cardinality-preserving variants (mod) read them
            for name in UNUSED:  # (RGATConv leaves some uninitialised: zeros, alike anywhere)
                getattr(conv, name).zero_().requires_grad_(False)
        return conv

    def conv(self, layer: int, x: torch.Tensor, block: Block) -> torch.Tensor:
        """RGATConv on the block: its edges' relations from ``block.edge_type``, their features
        from ``block.edge_attr`` (with ``edge_dim``)."""
        if block.edge_weight is not None:
            raise ValueError(self.spec().why_not_weighted())
        if self.training and self.attn_dropout > 0 and self.dropout_key is not None:
            raise ValueError("model.attn_dropout > 0 drops edges with torch's generator, which "
                             "replicas cannot agree on: set model.attn_dropout=0 with a "
                             "strategy that keys dropout")
        edge_attr = self.edge_attr(block) if self.edge_dim is not None else None
        return self.convs[layer]((x, x[: block.num_dst]), block.edge_index,
                                 self.relations(block), edge_attr, size=block.size)
