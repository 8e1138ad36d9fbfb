"""The shared base of the typed models (R-GCN, R-GAT): relation convs behind a typed input.

A typed model learns its relations (the graph's edge types) and node types when a graph is
bound (:meth:`TypedGNN.bind_graph`, called on every model before training): the convs (one
``relation_conv`` per layer over the relations) and the
:class:`~gnnscale.models.typed_input.TypedInput` are built there, so the parameters exist only
once a graph is bound, and binding again to a graph of the same types keeps them. Layer 0
reads the typed input's ``hidden``-wide rows (:meth:`TypedGNN.encode`), every conv is
``hidden -> hidden`` but the last (``hidden -> classes``), and a conv reads each edge's
relation from ``block.edge_type`` (:meth:`TypedGNN.relations`). A homogeneous graph is refused
in one line.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gnnscale.data.graph import GraphStore
from gnnscale.models.base import GNN
from gnnscale.models.typed_input import TypedInput, input_dims
from gnnscale.sampling.base import Block, TypedInputs


class Unbound(nn.Module):
    """A conv's place before :meth:`TypedGNN.bind_graph` names the relations."""

    def __init__(self, out_channels: int) -> None:
        super().__init__()
        self.out_channels = out_channels

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        """Refuse: there is no conv yet."""
        raise RuntimeError("the typed model has no relations yet: call model.bind_graph(graph) "
                           "first")


class TypedGNN(GNN):
    """Relation convs over a typed graph's edge types, behind a typed input."""

    sparse_conv = False  # relation convs run their own aggregation
    #: whose features the typed input reads (``all``, ``target``, ``none``: HGB's
    #: ``--feats-type``); the other types get embedding rows
    input_features: str = "all"

    def __init__(self, in_channels: int, out_channels: int, hidden: int = 256,
                 **kw: Any) -> None:
        self.hidden, self.out_channels = hidden, out_channels
        self.num_relations = 0
        self._bound: tuple | None = None
        super().__init__(in_channels, out_channels, hidden=hidden, **kw)
        self.typed_input: TypedInput | None = None

    def make_conv(self, layer: int, in_dim: int, out_dim: int) -> nn.Module:
        """:meth:`relation_conv` over the bound graph's relations (a placeholder before)."""
        if not self.num_relations:
            return Unbound(out_dim)
        return self.relation_conv(layer, in_dim, out_dim)

    def relation_conv(self, layer: int, in_dim: int, out_dim: int) -> nn.Module:
        """Layer ``layer``'s conv over :attr:`num_relations` relations."""
        raise NotImplementedError(f"{type(self).__name__}.relation_conv")

    @property
    def reads_typed_input(self) -> bool:
        """Whether layer 0 reads the typed input's rows (R-GCN's one-hot input does not)."""
        return True

    def input_width(self, graph: GraphStore) -> int:
        """The width of layer 0's input rows (the typed input's ``hidden``)."""
        return self.hidden

    def check_graph(self, graph: GraphStore) -> None:
        """Refuse a graph this model cannot read (a homogeneous one), in one line."""
        if not graph.is_typed:
            raise ValueError(f"{self.spec().title} trains typed graphs (several node or edge "
                             f"types); {graph.name} has one of each: use model=sage, gcn, gin "
                             "or gat")

    def bind_graph(self, graph: GraphStore) -> None:
        """Build the typed input (per node type) and the convs (over the edge types), then
        :meth:`bound`; binding again to a graph of the same types keeps the parameters."""
        self.check_graph(graph)
        dims, rows = input_dims(graph, self.input_features)
        key = (tuple(graph.edge_types), tuple(dims.items()), tuple(rows.items()))
        if self._bound is not None:
            if self._bound != key:
                raise ValueError(f"this {self.spec().title} is bound to a graph of other node "
                                 "or edge types")
            self.bound(graph)
            return
        self._bound, self.num_relations = key, len(graph.edge_types)
        widths = [self.input_width(graph)] + [self.hidden] * (self.num_layers - 1) + \
            [self.out_channels]
        self.convs = nn.ModuleList(self.make_conv(i, widths[i], widths[i + 1])
                                   for i in range(self.num_layers))
        if self.reads_typed_input:
            self.typed_input = TypedInput(dims, rows, self.hidden)
        self.bound(graph)

    def bound(self, graph: GraphStore) -> None:
        """What a model keeps of the graph it was (again) bound to (nothing here)."""

    def encode(self, inputs: TypedInputs | torch.Tensor) -> torch.Tensor:
        """Layer 0's source rows: the typed input's ``hidden``-wide rows."""
        if self.typed_input is None:
            raise RuntimeError(f"{self.spec().title} has no typed input yet: call "
                               "model.bind_graph(graph) first")
        return self.typed_input(inputs)

    def relations(self, block: Block) -> torch.Tensor:
        """Every edge's relation (int64), from ``block.edge_type``."""
        if block.edge_type is None:
            if self.num_relations == 1:
                return torch.zeros(block.num_edges, dtype=torch.int64,
                                   device=block.edge_index.device)
            raise ValueError(f"{self.spec().title} needs blocks that carry edge_type (sampled "
                             "from a typed graph)")
        return block.edge_type.long()

    def widths(self, in_dim: int) -> list[int]:
        """The typed input's width, then each layer's output."""
        return [self.hidden] * self.num_layers + [self.out_channels]
