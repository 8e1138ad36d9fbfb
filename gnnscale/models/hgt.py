"""HGT (Hu et al., 2020, "Heterogeneous Graph Transformer") from PyG's HGTConv.

Layer 0 reads the typed input's ``hidden``-wide rows (:class:`~gnnscale.models.typed_input.
TypedInput`). Every layer is an ``HGTConv(hidden, hidden, metadata, heads)`` over the bound
graph's node and edge types (per node type key/query/value and output maps, per edge type
relation-specific attention and message maps and a learned prior, a gated skip connection),
run on sampled blocks through the adapter of :mod:`gnnscale.models.hetero`: it reads every row
of the block per node type and updates them all, and the block keeps its destinations'. The
last layer's rows then go through one ``Linear(hidden, classes)`` (as PyG's HGT example reads
its target type), since HGTConv's width must divide by its heads. Every node type must be the
destination of some edge type (HGTConv updates no other, and leaves its maps untrained): build
the graph with reverse edges. Not split into aggregate and update; refuses weighted blocks.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch_geometric.nn import HGTConv

from gnnscale.data.graph import GraphStore
from gnnscale.models.hetero import TypedBlock, TypedGNN
from gnnscale.models.schemas import HGTConfig


class HGT(TypedGNN):
    """HGTConv layers over the bound types, then a linear map to the classes."""

    schema = HGTConfig
    option = "hgt"

    def __init__(self, in_channels: int, out_channels: int, heads: int = 4, hidden: int = 256,
                 **kw: Any) -> None:
        HGTConfig(hidden=hidden, heads=heads, residual=bool(kw.get("residual", False))).check()
        self.heads = heads
        super().__init__(in_channels, out_channels, hidden=hidden, **kw)
        self.out_lin = nn.Linear(hidden, out_channels)

    def options(self) -> dict[str, Any]:
        """The shared options and ``heads``."""
        return {**super().options(), "heads": self.heads}

    def check_types(self, graph: GraphStore) -> None:
        """Every node type must receive some edge type (HGTConv updates no other)."""
        dst = {et[2] for et in graph.edge_types}
        missing = [t for t in graph.node_types if t not in dst]
        if missing:
            raise ValueError(f"model=hgt updates only node types that some edge type points "
                             f"to, and {graph.name}'s {', '.join(missing)} receive none: build "
                             "the graph with reverse edges (add_reverse)")

    def typed_conv(self, layer: int, in_dim: int, out_dim: int) -> HGTConv:
        """An HGTConv over the bound node and edge types, ``hidden`` wide."""
        return HGTConv(self.hidden, self.hidden, (list(self.node_types),
                                                  list(self.edge_types)), heads=self.heads)

    def run_typed(self, layer: int, x_dict: dict[str, torch.Tensor], tb: TypedBlock
                  ) -> dict[str, torch.Tensor]:
        """The layer's HGTConv on the block's rows per type (the last layer then the class
        map, on the destinations only)."""
        out = self.convs[layer](x_dict, tb.edge_index)
        if layer < self.num_layers - 1:
            return out
        return {t: self.out_lin(h[: tb.num_dst[t]]) for t, h in out.items()}
