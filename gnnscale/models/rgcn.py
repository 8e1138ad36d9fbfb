"""R-GCN (Schlichtkrull et al., 2018) from PyG's RGCNConv, on typed graphs.

Layer 0 reads the rows of :class:`~gnnscale.models.typed_input.TypedInput` (``hidden`` wide:
each featured node type's features through its own linear map, each featureless type's rows
from its embedding table), so every conv is ``hidden -> hidden`` but the last
(``hidden -> classes``). A conv sums, per relation (edge type, from ``block.edge_type``), the
``aggr`` (mean by default) of its sources times that relation's weight, plus a root weight
of the destination's own row; ``num_bases`` > 0 makes each relation's weight a learned
combination of that many shared bases (the paper's basis decomposition).

The relations and node types come from the graph (:meth:`RGCN.bind_graph`, called on every
model before training): the convs and the typed input are built there, so the parameters
exist only once a graph is bound. R-GCN needs a typed graph and is not split into aggregate
and update (layer-wise strategies refuse it); weighted blocks are refused.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch_geometric.nn import RGCNConv

from gnnscale.data.graph import GraphStore
from gnnscale.models.base import GNN
from gnnscale.models.schemas import RGCNConfig
from gnnscale.models.typed_input import TypedInput
from gnnscale.sampling.base import Block, TypedInputs


class _Unbound(nn.Module):
    """A conv's place before :meth:`RGCN.bind_graph` names the relations."""

    def __init__(self, out_channels: int) -> None:
        super().__init__()
        self.out_channels = out_channels

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        raise RuntimeError("R-GCN has no relations yet: call model.bind_graph(graph) first")


class RGCN(GNN):
    """R-GCN over a typed graph's relations, with a typed input layer."""

    schema = RGCNConfig
    sparse_conv = False  # one aggregation per relation (RGCNConv's own loop)

    def __init__(self, in_channels: int, out_channels: int, num_bases: int = 0,
                 aggr: str = "mean", hidden: int = 256, **kw: Any) -> None:
        RGCNConfig(hidden=hidden, num_bases=num_bases, aggr=aggr,
                   residual=bool(kw.get("residual", False))).check()
        self.num_bases, self.aggr, self.hidden = num_bases, aggr, hidden
        self.num_relations = 0
        self.out_channels = out_channels
        self._bound: tuple | None = None
        super().__init__(in_channels, out_channels, hidden=hidden, **kw)
        self.typed_input: TypedInput | None = None

    def options(self) -> dict[str, Any]:
        """The shared options, ``num_bases`` and ``aggr``."""
        return {**super().options(), "num_bases": self.num_bases, "aggr": self.aggr}

    def make_conv(self, layer: int, in_dim: int, out_dim: int) -> nn.Module:
        """An RGCNConv over the bound graph's relations (a placeholder before binding)."""
        if not self.num_relations:
            return _Unbound(out_dim)
        return RGCNConv(in_dim, out_dim, self.num_relations, num_bases=self.num_bases or None,
                        aggr=self.aggr)

    def bind_graph(self, graph: GraphStore) -> None:
        """Build the typed input (per node type) and the convs (over the edge types); binding
        again to a graph of the same types keeps the parameters."""
        if not graph.is_typed:
            raise ValueError(f"model=rgcn trains typed graphs (several node or edge types); "
                             f"{graph.name} has one of each: use model=sage, gcn, gin or gat")
        dims = graph.feature_dims
        rows = {t: graph.num_nodes_of(t) for t, d in dims.items() if d == 0}
        key = (tuple(graph.edge_types), tuple(dims.items()), tuple(rows.items()))
        if self._bound is not None:
            if self._bound != key:
                raise ValueError("this R-GCN is bound to a graph of other node or edge types")
            return
        self._bound, self.num_relations = key, len(graph.edge_types)
        widths = [self.hidden] * self.num_layers + [self.out_channels]
        self.convs = nn.ModuleList(self.make_conv(i, widths[i], widths[i + 1])
                                   for i in range(self.num_layers))
        self.typed_input = TypedInput(dims, rows, self.hidden)

    def encode(self, inputs: TypedInputs | torch.Tensor) -> torch.Tensor:
        """Layer 0's source rows from the raw inputs (the typed input's ``hidden``-wide rows)."""
        if self.typed_input is None:
            raise RuntimeError("R-GCN has no typed input yet: call model.bind_graph(graph) first")
        return self.typed_input(inputs)

    def conv(self, layer: int, x: torch.Tensor, block: Block) -> torch.Tensor:
        """RGCNConv on the block, its edges' relations from ``block.edge_type``."""
        if block.edge_weight is not None:
            raise ValueError(self.spec().why_not_weighted())
        if block.edge_type is None:
            raise ValueError("R-GCN needs blocks that carry edge_type (sampled from a typed "
                             "graph)")
        return self.convs[layer]((x, x[: block.num_dst]), block.edge_index, block.edge_type)

    def widths(self, in_dim: int) -> list[int]:
        """The typed input's width, then each layer's output."""
        return [self.hidden] * self.num_layers + [self.out_channels]

    def forward(self, x: TypedInputs | torch.Tensor, blocks: list[Block]) -> torch.Tensor:
        """The typed input of layer 0's sources, then every layer on its block."""
        return super().forward(self.encode(x), blocks)
