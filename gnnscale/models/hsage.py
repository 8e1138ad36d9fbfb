"""Typed GraphSAGE, as PyG's ``to_hetero`` makes it: one SAGEConv per edge type, summed.

Layer 0 reads the typed input's ``hidden``-wide rows (:class:`~gnnscale.models.typed_input.
TypedInput`: a linear map per featured node type, a sparse embedding table per featureless
one). Every layer is a ``HeteroConv`` over the bound graph's edge types: each edge type
``(s, r, d)`` has its own ``SAGEConv((hidden, hidden), out, aggr)`` from the rows of type ``s``
to the destinations of type ``d`` (its own neighbour and root weights), and a destination's
output is the sum over the edge types into its type (``aggr='sum'`` across edge types, as
``to_hetero`` does). It runs on sampled blocks through the adapter of
:mod:`gnnscale.models.hetero`; it is not split into aggregate and update, and refuses weighted
blocks.
"""

from __future__ import annotations

from typing import Any

import torch
from torch_geometric.nn import HeteroConv, SAGEConv

from gnnscale.models.hetero import HeteroGNN, TypedBlock
from gnnscale.models.schemas import HSAGEConfig


class HSAGE(HeteroGNN):
    """GraphSAGE per edge type, summed over the edge types into each node type."""

    schema = HSAGEConfig

    def __init__(self, in_channels: int, out_channels: int, aggr: str = "mean",
                 hidden: int = 256, **kw: Any) -> None:
        HSAGEConfig(hidden=hidden, aggr=aggr, residual=bool(kw.get("residual", False))).check()
        self.aggr = aggr
        super().__init__(in_channels, out_channels, hidden=hidden, **kw)

    def options(self) -> dict[str, Any]:
        """The shared options and ``aggr``."""
        return {**super().options(), "aggr": self.aggr}

    def typed_conv(self, layer: int, in_dim: int, out_dim: int) -> HeteroConv:
        """A HeteroConv of one bipartite SAGEConv per edge type, summed."""
        return HeteroConv({et: SAGEConv((in_dim, in_dim), out_dim, aggr=self.aggr)
                           for et in self.edge_types}, aggr="sum")

    def run_typed(self, layer: int, x_dict: dict[str, torch.Tensor], tb: TypedBlock
                  ) -> dict[str, torch.Tensor]:
        """The layer's HeteroConv on (source rows, destination rows) per edge type."""
        return self.convs[layer](tb.pairs(x_dict), tb.edge_index, size_dict=tb.sizes())
