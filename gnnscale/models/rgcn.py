"""R-GCN (Schlichtkrull et al., 2018) from PyG's RGCNConv, on typed graphs.

Layer 0 reads the rows of :class:`~gnnscale.models.typed_input.TypedInput` (``hidden`` wide:
each featured node type's features through its own linear map, each featureless type's rows
from its embedding table), so every conv is ``hidden -> hidden`` but the last
(``hidden -> classes``). A conv sums, per relation (edge type, from ``block.edge_type``), the
``aggr`` (mean by default) of its sources times that relation's weight, plus a root weight
of the destination's own row; ``num_bases`` > 0 makes each relation's weight a learned
combination of that many shared bases (the paper's basis decomposition).

``featureless="onehot"`` reads the featureless input as the paper does instead: layer 0's
inputs are one-hot vertex ids (:meth:`RGCN.encode` gives the rows' global ids), so layer 0's
weight of each relation (and its root weight) has one learned row per vertex
(``RGCNConv(num_nodes, hidden)`` fed ids, as PyG's R-GCN example does with ``x=None``, here
computed in one gather and one scatter over the edges), dense
parameters the configured optimizer trains and decays; it needs every node type featureless
(AIFB, MUTAG). The default ``"embedding"`` looks each vertex up in a ``hidden``-wide embedding
table first (sparse, trained by SparseAdam), which any mix of featured and featureless types
takes. ``input_features`` (``all``, ``target``, ``none``) picks whose features the typed input
reads; the other types get embedding rows too (HGB runs R-GCN with ``none``).
``root_weight=False`` drops the root weight (a destination then reads only its neighbours,
as HGB's R-GCN, DGL's ``RelGraphConv`` without ``self_loop``).

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
from gnnscale.models.typed_input import TypedInput, input_dims
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
                 aggr: str = "mean", hidden: int = 256, featureless: str = "embedding",
                 input_features: str = "all", root_weight: bool = True, **kw: Any) -> None:
        RGCNConfig(hidden=hidden, num_bases=num_bases, aggr=aggr, featureless=featureless,
                   input_features=input_features, root_weight=root_weight,
                   input_dropout=float(kw.get("input_dropout", 0.0)),
                   residual=bool(kw.get("residual", False))).check()
        self.num_bases, self.aggr, self.hidden = num_bases, aggr, hidden
        self.featureless, self.input_features = featureless, input_features
        self.root_weight = bool(root_weight)
        self.num_relations = 0
        self.num_nodes = 0  # one-hot input: the width of layer 0's input (set at binding)
        self.out_channels = out_channels
        self._bound: tuple | None = None
        super().__init__(in_channels, out_channels, hidden=hidden, **kw)
        self.typed_input: TypedInput | None = None

    def options(self) -> dict[str, Any]:
        """The shared options, ``num_bases``, ``aggr`` and ``featureless``."""
        return {**super().options(), "num_bases": self.num_bases, "aggr": self.aggr,
                "featureless": self.featureless}

    def make_conv(self, layer: int, in_dim: int, out_dim: int) -> nn.Module:
        """An RGCNConv over the bound graph's relations (a placeholder before binding)."""
        if not self.num_relations:
            return _Unbound(out_dim)
        return RGCNConv(in_dim, out_dim, self.num_relations, num_bases=self.num_bases or None,
                        aggr=self.aggr, root_weight=self.root_weight)

    def bind_graph(self, graph: GraphStore) -> None:
        """Build the typed input (per node type) and the convs (over the edge types); binding
        again to a graph of the same types keeps the parameters."""
        if not graph.is_typed:
            raise ValueError(f"model=rgcn trains typed graphs (several node or edge types); "
                             f"{graph.name} has one of each: use model=sage, gcn, gin or gat")
        dims, rows = input_dims(graph, self.input_features)
        key = (tuple(graph.edge_types), tuple(dims.items()), tuple(rows.items()))
        if self._bound is not None:
            if self._bound != key:
                raise ValueError("this R-GCN is bound to a graph of other node or edge types")
            return
        if self.featureless == "onehot" and any(dims.values()):
            featured = [t for t, d in dims.items() if d]
            raise ValueError(f"model.featureless=onehot needs every node type featureless, but "
                             f"{graph.name}'s {', '.join(featured)} carry features: use "
                             "model.featureless=embedding")
        self._bound, self.num_relations = key, len(graph.edge_types)
        widths = [self.hidden] * self.num_layers + [self.out_channels]
        if self.featureless == "onehot":
            self.num_nodes = graph.num_nodes
            widths[0] = self.num_nodes
        self.convs = nn.ModuleList(self.make_conv(i, widths[i], widths[i + 1])
                                   for i in range(self.num_layers))
        if self.featureless == "embedding":
            self.typed_input = TypedInput(dims, rows, self.hidden)

    def encode(self, inputs: TypedInputs | torch.Tensor) -> torch.Tensor:
        """Layer 0's source rows from the raw inputs: the typed input's ``hidden``-wide rows,
        or (one-hot input) the rows' global vertex ids (int64), which layer 0 reads as
        one-hot."""
        if self.featureless == "onehot" and self.num_nodes:
            if not isinstance(inputs, TypedInputs):
                raise ValueError("model.featureless=onehot reads TypedInputs (the rows' ids), "
                                 "got a feature matrix")
            return inputs.ids
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
        if layer == 0 and self.featureless == "onehot" and self.num_nodes:
            return self._onehot_conv(self.convs[0], x, block)
        return self.convs[layer]((x, x[: block.num_dst]), block.edge_index, block.edge_type)

    def _onehot_conv(self, conv: RGCNConv, ids: torch.Tensor, block: Block) -> torch.Tensor:
        """Layer 0 on one-hot inputs (``ids``: the sources' global ids, destinations first):
        what ``conv`` computes fed ids, with its own parameters, in one gather of every edge's
        relation row and one scatter, instead of RGCNConv's loop that indexes the whole
        ``[relations, vertices, hidden]`` weight once per relation (its backward writes a
        dense gradient of that size per relation: 90 of them on AIFB)."""
        rels, width = self.num_relations, conv.out_channels
        if conv.num_bases is not None:
            weight = (conv.comp @ conv.weight.view(conv.num_bases, -1)).view(rels, -1, width)
        else:
            weight = conv.weight
        src, dst = block.edge_index
        rel = block.edge_type.long()
        msg = weight.reshape(-1, width)[rel * self.num_nodes + ids[src]]
        if self.aggr == "mean":  # the mean over each destination's edges of each relation
            key = dst * rels + rel
            count = torch.bincount(key, minlength=block.num_dst * rels).clamp_(min=1)
            msg = msg / count[key].unsqueeze(1).to(msg.dtype)
        out = msg.new_zeros(block.num_dst, width).index_add_(0, dst, msg)
        if conv.root is not None:
            out = out + conv.root[ids[: block.num_dst]]
        if conv.bias is not None:
            out = out + conv.bias
        return out

    def widths(self, in_dim: int) -> list[int]:
        """The typed input's width, then each layer's output (one-hot input: layer 0 reads
        one id per row, as wide as ``hidden`` rows would be in this list)."""
        return [self.hidden] * self.num_layers + [self.out_channels]
