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

Without pyg-lib's segment matmul, PyG's per-relation maps (``HeteroLinear``, one weight per
head and edge type) write each type's rows into a slice of one output, and autograd then copies
the whole gradient once per type: 40 types on hetero_sim, most of a step. Here the same maps
multiply each type's rows and concatenate them (the same weights and products, one copy).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch_geometric.nn import HGTConv
from torch_geometric.nn.dense import HeteroLinear

from gnnscale.data.graph import GraphStore
from gnnscale.models.hetero import HeteroGNN, TypedBlock
from gnnscale.models.schemas import HGTConfig


class _SegmentLinear(HeteroLinear):
    """PyG's ``HeteroLinear`` whose fallback product (rows sorted by type, no segment
    matmul) concatenates each type's product instead of writing it into a slice."""

    def forward_naive(self, x: torch.Tensor, type_ptr: torch.Tensor) -> torch.Tensor:
        sizes = (type_ptr[1:] - type_ptr[:-1]).tolist()
        parts = [rows @ self.weight[i] for i, rows in enumerate(x.split(sizes)) if rows.numel()]
        return torch.cat(parts) if parts else x.new_zeros(0, self.out_channels)


def _hgt_conv(*args: Any, **kwargs: Any) -> HGTConv:
    """PyG's HGTConv with its relation maps as :class:`_SegmentLinear` (the same parameters)."""
    conv = HGTConv(*args, **kwargs)
    for lin in (conv.k_rel, conv.v_rel):
        lin.__class__ = _SegmentLinear
    return conv


class HGT(HeteroGNN):
    """HGTConv layers over the bound types, then a linear map to the classes."""

    schema = HGTConfig

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
        return _hgt_conv(self.hidden, self.hidden, (list(self.node_types),
                                                    list(self.edge_types)), heads=self.heads)

    def run_typed(self, layer: int, x_dict: dict[str, torch.Tensor], tb: TypedBlock
                  ) -> dict[str, torch.Tensor]:
        """The layer's HGTConv on the block's rows per type (the last layer then the class
        map, on the destinations only)."""
        out = self.convs[layer](x_dict, tb.edge_index)
        if layer < self.num_layers - 1:
            return out
        return {t: self.out_lin(h[: tb.num_dst[t]]) for t, h in out.items()}
