"""Sampled blocks of a typed graph as PyG's heterogeneous inputs, and the typed models on them.

A :class:`~gnnscale.sampling.base.Block` of a typed graph is one bipartite graph over global
vertex ids (``src_ids``, destinations first) whose edges carry their type (``edge_type``).
PyG's heterogeneous convs (``HeteroConv``, ``HGTConv``) read instead one row matrix per node
type (``x_dict``) and one ``edge_index`` per edge type in type-local row positions.
:class:`TypedBlock` converts between the two, vectorised: one stable sort of the rows by node
type (so each type's rows keep block order, its destinations first) and one of the edges by
edge type (so each type's edges keep their in-edge order); per node type the block rows of
that type, per edge type its edges in type-local positions, and back, the per-type outputs of
the destinations gathered into the block's destination order in one index.

:class:`HeteroGNN` is the base of the typed models built on it (``model=hsage``, ``hgat``,
``hgt``): it binds the graph's node and edge types
(:meth:`~gnnscale.models.typed.TypedGNN.bind_graph` builds the typed input and the convs, so
the parameters exist only once a graph is bound), encodes raw
:class:`~gnnscale.sampling.base.TypedInputs` through the typed input
(:class:`~gnnscale.models.typed_input.TypedInput`) and runs each conv through the adapter;
the norms, activation and (keyed) dropout between convs are the base model's, vertex-wise as
ever, so any strategy that calls :meth:`GNN.layer` runs them. A destination of a node type
that no edge type points to receives no message: its row is what the model's own per-type
terms give (zeros when it has none). These models are not split into aggregate and update.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gnnscale.data.graph import GraphStore
from gnnscale.models.typed import TypedGNN
from gnnscale.sampling.base import Block

EdgeType = tuple[str, str, str]


class TypedBlock:
    """A block split by node type and edge type (PyG's heterogeneous layout).

    ``rows[t]`` are the block rows (positions in ``src_ids``) of node type ``t`` in block
    order, so its first ``num_dst[t]`` are its destinations; ``edge_index[et]`` holds edge type
    ``et``'s edges with sources as positions in ``rows[src type]`` and destinations as positions
    in ``rows[dst type]`` (< ``num_dst[dst type]``), in block order."""

    def __init__(self, block: Block, offsets: torch.Tensor, node_types: tuple[str, ...],
                 edge_types: tuple[EdgeType, ...]) -> None:
        if block.src_ids is None:
            raise ValueError("a typed model needs blocks that carry src_ids (the rows' global "
                             "ids, which name their node types)")
        if block.edge_type is None and len(edge_types) > 1:
            raise ValueError("a typed model needs blocks that carry edge_type (sampled from a "
                             "typed graph)")
        self.node_types, self.edge_types = node_types, edge_types
        self.num_dst_rows = block.num_dst
        kind = torch.searchsorted(offsets[1:-1], block.src_ids.long(), right=True)
        order = torch.argsort(kind, stable=True)
        counts = torch.bincount(kind, minlength=len(node_types))
        starts = torch.cumsum(counts, 0) - counts
        local = torch.empty_like(order)
        local[order] = torch.arange(order.numel(), device=order.device) - starts[kind[order]]
        dst_kind = kind[: block.num_dst]
        dst_counts = torch.bincount(dst_kind, minlength=len(node_types))
        #: each destination's position among the destinations sorted by type
        self.dst_pos = (torch.cumsum(dst_counts, 0) - dst_counts)[dst_kind] + \
            local[: block.num_dst]
        self.rows = dict(zip(node_types, torch.split(order, counts.tolist()), strict=True))
        self.num_dst = dict(zip(node_types, dst_counts.tolist(), strict=True))
        ei = local[block.edge_index]
        if len(edge_types) == 1:
            self.edge_index = {edge_types[0]: ei}
        else:
            et = block.edge_type.long()
            by_type = torch.argsort(et, stable=True)
            sizes = torch.bincount(et, minlength=len(edge_types)).tolist()
            if len(sizes) > len(edge_types):
                raise ValueError(f"a block's edge_type names type {len(sizes) - 1}, but the "
                                 f"model was bound to {len(edge_types)} edge types")
            self.edge_index = dict(zip(edge_types, torch.split(ei[:, by_type], sizes, dim=1),
                                       strict=True))

    def x_dict(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Per node type the rows of ``x`` (the block's sources) of that type."""
        return {t: x[r] for t, r in self.rows.items()}

    def sizes(self) -> dict[EdgeType, tuple[int, int]]:
        """Per edge type its bipartite size: (its source type's rows, its destination type's
        destinations)."""
        return {et: (int(self.rows[et[0]].numel()), self.num_dst[et[2]])
                for et in self.edge_types}

    def pairs(self, x_dict: dict[str, torch.Tensor]
              ) -> dict[EdgeType, tuple[torch.Tensor, torch.Tensor]]:
        """Per edge type (its source type's rows, its destination type's destination rows):
        what a bipartite conv of that edge type reads."""
        return {et: (x_dict[et[0]], x_dict[et[2]][: self.num_dst[et[2]]])
                for et in self.edge_types}

    def gather(self, out: dict[str, torch.Tensor], width: int, like: torch.Tensor
               ) -> torch.Tensor:
        """The block's destination rows in block order from per-type outputs (``out[t]``: at
        least the ``num_dst[t]`` destinations of type ``t`` first; a type missing from ``out``
        gives zero rows ``width`` wide)."""
        parts = [out[t][: n] if t in out else like.new_zeros(n, width)
                 for t, n in self.num_dst.items()]
        return torch.cat(parts)[self.dst_pos]


class HeteroGNN(TypedGNN):
    """A typed model whose layers are PyG heterogeneous convs over the bound graph's node and
    edge types (subclasses build one in :meth:`typed_conv` and run it in :meth:`run_typed`);
    binding, the typed input and ``encode`` are :class:`~gnnscale.models.typed.TypedGNN`'s."""

    def __init__(self, in_channels: int, out_channels: int, hidden: int = 256,
                 **kw: Any) -> None:
        self.node_types: tuple[str, ...] = ()
        self.edge_types: tuple[EdgeType, ...] = ()
        super().__init__(in_channels, out_channels, hidden=hidden, **kw)
        self.register_buffer("type_offset", torch.zeros(1, dtype=torch.int64),
                             persistent=False)

    def relation_conv(self, layer: int, in_dim: int, out_dim: int) -> nn.Module:
        """:meth:`typed_conv` over the bound node and edge types."""
        return self.typed_conv(layer, in_dim, out_dim)

    def typed_conv(self, layer: int, in_dim: int, out_dim: int) -> nn.Module:
        """Conv ``layer`` over :attr:`node_types` and :attr:`edge_types`."""
        raise NotImplementedError(f"{type(self).__name__}.typed_conv")

    def bind_graph(self, graph: GraphStore) -> None:
        """Take the graph's node and edge types (the convs are built over them), then bind as
        every typed model does."""
        if self._bound is None and graph.is_typed:
            self.node_types, self.edge_types = tuple(graph.node_types), tuple(graph.edge_types)
        super().bind_graph(graph)

    def check_graph(self, graph: GraphStore) -> None:
        """A typed graph the model can train (:meth:`check_types`)."""
        super().check_graph(graph)
        self.check_types(graph)

    def check_types(self, graph: GraphStore) -> None:
        """Refuse a typed graph the model cannot train (default: any is fine)."""

    def bound(self, graph: GraphStore) -> None:
        """Keep the graph's node type offsets (the adapter splits rows by them)."""
        self.type_offset = graph.node_type_offset.to(torch.int64).clone()

    def typed_block(self, block: Block) -> TypedBlock:
        """The block in PyG's heterogeneous layout (the adapter)."""
        return TypedBlock(block, self.type_offset, self.node_types, self.edge_types)

    def conv(self, layer: int, x: torch.Tensor, block: Block) -> torch.Tensor:
        """Conv ``layer`` on the block through the adapter: ``x`` holds the block's sources
        (destinations first); the result its destinations, in block order."""
        if block.edge_weight is not None:
            raise ValueError(self.spec().why_not_weighted())
        if not self.edge_types:
            raise RuntimeError(f"{self.spec().title} has no node or edge types yet: call "
                               "model.bind_graph(graph) first")
        tb = self.typed_block(block)
        out = self.run_typed(layer, tb.x_dict(x), tb)
        return tb.gather(out, self.widths(self.hidden)[layer + 1], x)

    def run_typed(self, layer: int, x_dict: dict[str, torch.Tensor], tb: TypedBlock
                  ) -> dict[str, torch.Tensor]:
        """Conv ``layer`` on the per-type rows: per node type its destinations' outputs
        first."""
        raise NotImplementedError
