"""Typed GAT, as PyG's ``to_hetero`` makes it: one GATConv per edge type, summed.

Layer 0 reads the typed input's ``hidden``-wide rows (:class:`~gnnscale.models.typed_input.
TypedInput`). Every layer is a ``HeteroConv`` over the bound graph's edge types: each edge type
``(s, r, d)`` has its own bipartite ``GATConv`` from the rows of type ``s`` to the destinations
of type ``d`` (``add_self_loops=False``: a bipartite relation has no self loops), ``heads``
concatenated heads of ``hidden // heads`` channels in hidden layers and ``out_heads`` averaged
in the last, and a destination's output is the sum over the edge types into its type
(``aggr='sum'``, as ``to_hetero`` does). ``skip`` (default on) adds a linear map of each
destination's own row per node type, as PyG's ``to_hetero`` GAT example does
(``conv(x, edge_index) + lin(x)``): without self loops attention never reads it. It runs on
sampled blocks through the adapter of :mod:`gnnscale.models.hetero`; it is not split into
aggregate and update (the softmax spans a destination's in-edges), and refuses weighted
blocks.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch_geometric.nn import GATConv, HeteroConv

from gnnscale.data.graph import GraphStore
from gnnscale.models.hetero import HeteroGNN, TypedBlock
from gnnscale.models.schemas import HGATConfig


class HGAT(HeteroGNN):
    """Multi-head GAT per edge type, summed over the edge types into each node type, plus a
    per-node-type skip linear."""

    schema = HGATConfig

    def __init__(self, in_channels: int, out_channels: int, heads: int = 4, out_heads: int = 1,
                 attn_dropout: float = 0.0, skip: bool = True, hidden: int = 256,
                 **kw: Any) -> None:
        HGATConfig(hidden=hidden, heads=heads, out_heads=out_heads, attn_dropout=attn_dropout,
                   skip=skip, residual=bool(kw.get("residual", False))).check()
        self.heads, self.out_heads, self.attn_dropout = heads, out_heads, attn_dropout
        self.skip = bool(skip)
        super().__init__(in_channels, out_channels, hidden=hidden, **kw)
        self.skips = nn.ModuleList()

    def options(self) -> dict[str, Any]:
        """The shared options and the attention's."""
        return {**super().options(), "heads": self.heads, "out_heads": self.out_heads,
                "attn_dropout": self.attn_dropout, "skip": self.skip}

    def typed_conv(self, layer: int, in_dim: int, out_dim: int) -> HeteroConv:
        """A HeteroConv of one bipartite GATConv per edge type (no self loops), summed."""
        last = layer == self.num_layers - 1
        heads = self.out_heads if last else self.heads
        width = out_dim if last else out_dim // self.heads

        def gat() -> GATConv:
            return GATConv((in_dim, in_dim), width, heads=heads, concat=not last,
                           dropout=self.attn_dropout, add_self_loops=False)

        return HeteroConv({et: gat() for et in self.edge_types}, aggr="sum")

    def bind_graph(self, graph: GraphStore) -> None:
        """The typed input and convs (:meth:`HeteroGNN.bind_graph`), then per layer a skip
        linear per node type."""
        bound = self._bound is not None
        super().bind_graph(graph)
        if bound or not self.skip:
            return
        widths = self.widths(self.hidden)
        self.skips = nn.ModuleList(
            nn.ModuleDict({t: nn.Linear(widths[i], widths[i + 1]) for t in self.node_types})
            for i in range(self.num_layers))

    def run_typed(self, layer: int, x_dict: dict[str, torch.Tensor], tb: TypedBlock
                  ) -> dict[str, torch.Tensor]:
        """The layer's HeteroConv on (source rows, destination rows) per edge type, plus each
        type's skip linear of its destinations' own rows."""
        if self.training and self.attn_dropout > 0 and self.dropout_key is not None:
            raise ValueError("model.attn_dropout > 0 drops edges with torch's generator, which "
                             "replicas cannot agree on: set model.attn_dropout=0 with a "
                             "strategy that keys dropout (fullgraph)")
        out = self.convs[layer](tb.pairs(x_dict), tb.edge_index, size_dict=tb.sizes())
        if not self.skip:
            return out
        for t, lin in self.skips[layer].items():
            own = lin(x_dict[t][: tb.num_dst[t]])
            out[t] = own if t not in out else out[t] + own
        return out
