"""R-GCN (Schlichtkrull et al., 2018) on typed graphs, its convs PyG's RGCNConv's parameters.

Layer 0 reads the rows of :class:`~gnnscale.models.typed_input.TypedInput` (``hidden`` wide:
each featured node type's features through its own linear map, each featureless type's rows
from its embedding table), so every conv is ``hidden -> hidden`` but the last
(``hidden -> classes``). A conv sums, per relation (edge type, from ``block.edge_type``), the
``aggr`` (mean by default) of its sources times that relation's weight, plus a root weight
of the destination's own row; ``num_bases`` > 0 makes each relation's weight a learned
combination of that many shared bases (the paper's basis decomposition).

Every conv is an ``RGCNConv`` module (its ``weight``, ``comp``, ``root`` and ``bias``: state
dicts are PyG's), but it does not run RGCNConv's loop (one masked propagate and matmul per
relation, whose backward dominated an epoch): it runs in the split form. The aggregate sums
every edge ``(u, v)`` of relation ``r`` into slot ``r`` of row ``v``, ``w_uv * x[u]``, as one
sparse product with rows ``v * R + r`` (:meth:`GNN.aggregate_slots` ``= R``), viewed as
``[num_dst, R * in]``; the update is that times the relations' weights stacked
(``[R * in, out]``, ``comp @ bases`` with the decomposition) plus ``x_v @ root`` and the bias.
:meth:`RGCN.conv` weighs by the block's own per-(destination, relation) edge counts (mean) or
1 (add): what RGCNConv computes on the block. :meth:`GNN.aggregate` (the split contract that
whole-graph strategies use) weighs by the bound graph's per-(vertex, relation) in-degrees
instead, so partial aggregates over disjoint edge sets add up exactly, as SAGE's do with the
graph's degrees; with every in-edge in the block the two agree.

``featureless="onehot"`` reads the featureless input as the paper does instead: layer 0's
inputs are one-hot vertex ids (:meth:`RGCN.encode` gives the rows' global ids), so layer 0's
weight of each relation (and its root weight) has one learned row per vertex
(``RGCNConv(num_nodes, hidden)`` fed ids, as PyG's R-GCN example does with ``x=None``, here
computed in one gather and one scatter over the edges), dense
parameters the configured optimizer trains and decays; it needs every node type featureless
(AIFB, MUTAG), and is not split into aggregate and update (layer 0's aggregate of one-hot rows
would be ``R * num_nodes`` wide). The default ``"embedding"`` looks each vertex up in a
``hidden``-wide embedding table first (sparse, trained by SparseAdam), which any mix of
featured and featureless types takes.
``input_features`` (``all``, ``target``, ``none``) picks whose features the typed input
reads; the other types get embedding rows too (HGB runs R-GCN with ``none``).
``root_weight=False`` drops the root weight (a destination then reads only its neighbours,
as HGB's R-GCN, DGL's ``RelGraphConv`` without ``self_loop``).

The relations and node types come from the graph (:meth:`TypedGNN.bind_graph`,
:mod:`gnnscale.models.typed`, called on every model before training): the convs and the typed
input are built there, so the parameters exist only once a graph is bound. R-GCN needs a typed
graph; its relation weights never move
before the aggregation (no update-before-aggregate); weighted blocks are refused.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import nn
from torch_geometric.nn import RGCNConv

from gnnscale.data.graph import GraphStore
from gnnscale.models.base import csr_matrix, slot_rows
from gnnscale.models.schemas import RGCNConfig
from gnnscale.models.typed import TypedGNN, Unbound
from gnnscale.ops.sparse import fixed_mm
from gnnscale.sampling.base import Block, TypedInputs


class RGCN(TypedGNN):
    """R-GCN over a typed graph's relations, with a typed input layer."""

    schema = RGCNConfig

    def __init__(self, in_channels: int, out_channels: int, num_bases: int = 0,
                 aggr: str = "mean", hidden: int = 256, featureless: str = "embedding",
                 input_features: str = "all", root_weight: bool = True, **kw: Any) -> None:
        RGCNConfig(hidden=hidden, num_bases=num_bases, aggr=aggr, featureless=featureless,
                   input_features=input_features, root_weight=root_weight,
                   input_dropout=float(kw.get("input_dropout", 0.0)),
                   residual=bool(kw.get("residual", False)),
                   reorder_update=str(kw.get("reorder_update", "auto")).lower()).check()
        self.num_bases, self.aggr, self.featureless = num_bases, aggr, featureless
        self.input_features, self.root_weight = input_features, bool(root_weight)
        self.num_nodes = 0  # one-hot input: the width of layer 0's input (set at binding)
        super().__init__(in_channels, out_channels, hidden=hidden, **kw)
        #: aggr=mean: 1 / the bound graph's in-degree of every (vertex, relation), at
        #: ``vertex * R + relation`` (what the split aggregate weighs by)
        self.register_buffer("rel_deg_inv", None, persistent=False)
        #: the bound graph's node type offsets (a destination's type picks its relations)
        self.register_buffer("type_offset", None, persistent=False)
        #: per node type (the graph's order) the relations into it
        self.relations_into: list[list[int]] = []
        #: each relation's position among the relations into its destination type
        self.slot_in_type: torch.Tensor | None = None

    def options(self) -> dict[str, Any]:
        """The shared options, ``num_bases``, ``aggr`` and ``featureless``."""
        return {**super().options(), "num_bases": self.num_bases, "aggr": self.aggr,
                "featureless": self.featureless}

    def relation_conv(self, layer: int, in_dim: int, out_dim: int) -> nn.Module:
        """An RGCNConv over the relations: it holds the parameters, :meth:`conv` computes."""
        return RGCNConv(in_dim, out_dim, self.num_relations, num_bases=self.num_bases or None,
                        aggr=self.aggr, root_weight=self.root_weight)

    @property
    def reads_typed_input(self) -> bool:
        """False for one-hot input (layer 0 reads vertex ids)."""
        return self.featureless != "onehot"

    def input_width(self, graph: GraphStore) -> int:
        """``hidden``, or (one-hot input) the graph's vertex count."""
        return self.hidden if self.reads_typed_input else graph.num_nodes

    def check_graph(self, graph: GraphStore) -> None:
        """A typed graph; with one-hot input every node type featureless."""
        super().check_graph(graph)
        if self.featureless == "onehot" and any(graph.feature_dims.values()):
            featured = [t for t, d in graph.feature_dims.items() if d]
            raise ValueError(f"model.featureless=onehot needs every node type featureless, but "
                             f"{graph.name}'s {', '.join(featured)} carry features: use "
                             "model.featureless=embedding")

    def bound(self, graph: GraphStore) -> None:
        """Keep the relations into each node type, the type offsets and (``aggr=mean`` of a
        splittable R-GCN) the graph's per-(vertex, relation) in-degrees."""
        if self.featureless == "onehot":
            self.num_nodes = graph.num_nodes
        self.relations_into = [[r for r, (_, _, d) in enumerate(graph.edge_types) if d == t]
                               for t in graph.node_types]
        into = torch.zeros(self.num_relations, dtype=torch.int64)
        for rels in self.relations_into:
            into[rels] = torch.arange(len(rels))
        self.slot_in_type = into
        device = next(self.parameters()).device
        self.type_offset = graph.node_type_offset.clone().to(device)
        if self.aggr == "mean" and self.splittable:
            deg = relation_degrees(graph).float().clamp_(min=1.0).reciprocal_()
            self.rel_deg_inv = deg.to(device)

    def encode(self, inputs: TypedInputs | torch.Tensor) -> torch.Tensor:
        """Layer 0's source rows from the raw inputs: the typed input's ``hidden``-wide rows,
        or (one-hot input) the rows' global vertex ids (int64), which layer 0 reads as
        one-hot."""
        if self.featureless == "onehot" and self.num_nodes:
            if not isinstance(inputs, TypedInputs):
                raise ValueError("model.featureless=onehot reads TypedInputs (the rows' ids), "
                                 "got a feature matrix")
            return inputs.ids
        return super().encode(inputs)

    # ---- the conv on a block ------------------------------------------------------------------
    def conv(self, layer: int, x: torch.Tensor, block: Block) -> torch.Tensor:
        """RGCNConv on the block, its edges' relations from ``block.edge_type``: each edge's
        ``w * x[u]`` summed into its (destination, relation) slot, ``w`` = 1 / that slot's edge
        count in the block (mean) or 1 (add), then the relations' weights (:meth:`_typed_sum`
        when the block carries ``src_ids``, else every relation's slot of every destination
        and :meth:`conv_update`)."""
        if block.edge_weight is not None:
            raise ValueError(self.spec().why_not_weighted())
        rel = self.relations(block)
        if layer == 0 and self.featureless == "onehot" and self.num_nodes:
            return self._onehot_conv(self.convs[0], x, block, rel)
        if isinstance(self.convs[layer], Unbound):
            self.convs[layer]()
        src, dst = block.edge_index
        if block.src_ids is None or self.type_offset is None:
            layout = None
            rows, num_rows = slot_rows(dst, rel, self.num_relations), \
                block.num_dst * self.num_relations
        else:
            layout = self._layout(block.src_ids[: block.num_dst])
            rows, num_rows = layout[0][dst] + self.slot_in_type.to(rel.device)[rel], layout[1]
        w = None
        if self.aggr == "mean":  # over each destination's edges of each relation in the block
            count = torch.bincount(rows, minlength=num_rows)
            w = count.clamp_(min=1).to(x.dtype).reciprocal_()[rows]
        size = (block.num_src, num_rows)
        matrix = segment_csr(src, rows, w, size, x.dtype)
        if x.requires_grad and torch.is_grad_enabled():  # its transpose built once, here
            agg = fixed_mm(matrix, csr_matrix(rows, src, w, size[::-1], x.dtype), x)
        else:
            agg = torch.sparse.mm(matrix, x)
        if layout is None:
            return self.conv_update(layer, agg.view(block.num_dst, -1), x[: block.num_dst])
        out = self._typed_sum(self.convs[layer], agg, layout[2], layout[3])
        return self._root_bias(self.convs[layer], out, x[: block.num_dst])

    def _layout(self, dst_ids: torch.Tensor
                ) -> tuple[torch.Tensor, int, list[int], torch.Tensor | None]:
        """Where :meth:`conv` sums each destination's relations: the destinations grouped by
        node type, type ``t``'s ``n_t`` destinations owning ``n_t * R_t`` consecutive rows (one
        per relation into ``t``, ``R_t`` of them), so each type's aggregate is a contiguous
        ``[n_t, R_t * in]`` view and no row of a relation that cannot reach it exists.
        Returns (every destination's first row, the rows in all, ``n_t`` per type, the order
        that restores the destinations from their grouping, None when already grouped)."""
        kinds = self._kinds(dst_ids)
        widths = torch.tensor([len(r) for r in self.relations_into], device=kinds.device)
        counts = torch.bincount(kinds, minlength=widths.numel())
        starts = torch.zeros_like(counts)
        starts[1:] = (counts * widths).cumsum(0)[:-1]
        grouped = kinds.numel() < 2 or not bool((kinds[1:] < kinds[:-1]).any())
        order = torch.arange(kinds.numel(), device=kinds.device) if grouped \
            else torch.argsort(kinds, stable=True)
        first = torch.zeros_like(counts)
        first[1:] = counts.cumsum(0)[:-1]
        rank = torch.empty_like(order)
        rank[order] = torch.arange(order.numel(), device=order.device)
        first_row = starts[kinds] + (rank - first[kinds]) * widths[kinds]
        return (first_row, int((counts * widths).sum()), counts.tolist(),
                None if grouped else rank)

    def _typed_sum(self, conv: RGCNConv, agg: torch.Tensor, counts: list[int],
                   restore: torch.Tensor | None) -> torch.Tensor:
        """``sum over relations r into v's type of agg[v, r] @ W_r`` for the rows of
        :meth:`_layout`: one matmul per node type, then the destinations' own order."""
        width, n_in = conv.out_channels, agg.shape[1]
        sizes = [n * len(rels) for rels, n in zip(self.relations_into, counts)]
        parts = []
        for rels, n, rows in zip(self.relations_into, counts, agg.split(sizes)):
            if n == 0:
                continue
            if not rels:
                parts.append(agg.new_zeros(n, width))
                continue
            parts.append(rows.view(n, len(rels) * n_in) @ self.type_weight(conv, rels))
        out = parts[0] if len(parts) == 1 else torch.cat(parts)
        return out if restore is None else out[restore]

    def type_weight(self, conv: RGCNConv, rels: list[int]) -> torch.Tensor:
        """The weights of relations ``rels`` stacked, ``[len(rels) * in, out]`` (slices and,
        with the basis decomposition, their rows of ``comp`` times the bases: no gather whose
        backward scatters a whole weight)."""
        width = conv.out_channels
        if conv.num_bases is not None:
            comp = torch.cat([conv.comp[r: r + 1] for r in rels])
            return (comp @ conv.weight.view(conv.num_bases, -1)).view(-1, width)
        return torch.cat([conv.weight[r] for r in rels])

    def _onehot_conv(self, conv: RGCNConv, ids: torch.Tensor, block: Block,
                     rel: torch.Tensor) -> torch.Tensor:
        """Layer 0 on one-hot inputs (``ids``: the sources' global ids, destinations first):
        what ``conv`` computes fed ids, with its own parameters, in one gather of every edge's
        relation row and one scatter, instead of RGCNConv's loop that indexes the whole
        ``[relations, vertices, hidden]`` weight once per relation (its backward writes a
        dense gradient of that size per relation: 90 of them on AIFB)."""
        rels, width = self.num_relations, conv.out_channels
        src, dst = block.edge_index
        msg = self.relation_weight(conv).view(-1, width)[rel * self.num_nodes + ids[src]]
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

    @staticmethod
    def relation_weight(conv: RGCNConv) -> torch.Tensor:
        """The relations' weights stacked, ``[R * in, out]`` (row ``r * in + i``: relation
        ``r``'s row ``i``); with the basis decomposition ``comp @ bases``."""
        width = conv.out_channels
        if conv.num_bases is not None:
            return (conv.comp @ conv.weight.view(conv.num_bases, -1)).view(-1, width)
        return conv.weight.view(-1, width)

    # ---- aggregate / update (the split contract) ----------------------------------------------
    def aggregate_slots(self, layer: int) -> int:
        """One sum per relation."""
        return self.num_relations

    def edge_slot(self, layer: int, block: Block) -> torch.Tensor:
        """Every edge's relation."""
        return self.relations(block)

    def edge_weight(self, layer: int, block: Block) -> torch.Tensor | None:
        """``aggr=mean``: ``1 / in-degree of (v, relation)`` in the bound graph (the block's
        own counts before any graph is bound); ``add``: None."""
        if self.aggr != "mean":
            return None
        rows = slot_rows(block.edge_index[1], self.relations(block), self.num_relations)
        if self.rel_deg_inv is None:  # the block holds every in-edge of its destinations
            count = torch.bincount(rows, minlength=block.num_dst * self.num_relations)
            return count.clamp(min=1).float().reciprocal()[rows]
        dst = self.dst_ids(block).to(self.rel_deg_inv.device).long()
        keys = slot_rows(dst[block.edge_index[1].to(dst.device)],
                         self.relations(block).to(dst.device), self.num_relations)
        return self.rel_deg_inv[keys]

    def reorders(self, layer: int) -> bool:
        """Never: each relation has its own weight, so no one linear moves before the sum."""
        return False

    def conv_update(self, layer: int, agg: torch.Tensor, x_dst: torch.Tensor,
                    dst_ids: torch.Tensor | None = None,
                    z_dst: torch.Tensor | None = None) -> torch.Tensor:
        """``agg @ stacked relation weights + x_dst @ root + bias`` (``agg``: ``[num_dst,
        R * in]``, the slotted aggregate); given ``dst_ids``, each destination multiplies only
        the slots of the relations into its node type (the others are zero)."""
        conv = self.convs[layer]
        if dst_ids is None or self.type_offset is None:
            out = agg @ self.relation_weight(conv)
        else:
            out = self._relation_product(conv, agg.view(agg.shape[0], self.num_relations, -1),
                                         self._kinds(dst_ids))
        return self._root_bias(conv, out, x_dst)

    def _kinds(self, ids: torch.Tensor) -> torch.Tensor:
        """The node type (index) of every global id in ``ids``."""
        offset = self.type_offset
        return torch.searchsorted(offset[1:-1], ids.to(offset.device).long(), right=True)

    def _relation_product(self, conv: RGCNConv, agg: torch.Tensor, kinds: torch.Tensor
                          ) -> torch.Tensor:
        """``sum over relations r of agg[v, r] @ W_r`` per destination ``v``, one matmul per
        destination node type over only the relations into it (``agg``: ``[n, R, in]``;
        ``kinds``: each row's node type)."""
        n, width = agg.shape[0], conv.out_channels
        out = None
        for t, rels in enumerate(self.relations_into):
            if not rels:
                continue
            pos = (kinds == t).nonzero().flatten()
            if pos.numel() == 0:
                continue
            index = torch.tensor(rels, device=agg.device)
            mine = agg.index_select(1, index)
            if pos.numel() < n:
                mine = mine.index_select(0, pos)
            part = mine.reshape(pos.numel(), -1) @ self.type_weight(conv, rels)
            if pos.numel() == n:
                return part
            out = (agg.new_zeros(n, width) if out is None else out).index_copy(0, pos, part)
        return agg.new_zeros(n, width) if out is None else out

    @staticmethod
    def _root_bias(conv: RGCNConv, out: torch.Tensor, x_dst: torch.Tensor) -> torch.Tensor:
        """``out + x_dst @ root + bias`` (each when the conv has it)."""
        if conv.root is not None:
            out = torch.addmm(out, x_dst, conv.root)
        if conv.bias is not None:
            out = out + conv.bias
        return out

    def widths(self, in_dim: int) -> list[int]:
        """The typed input's width, then each layer's output (one-hot input: layer 0 reads
        one id per row, as wide as ``hidden`` rows would be in this list)."""
        return super().widths(in_dim)


def relation_degrees(graph: GraphStore) -> torch.Tensor:
    """Every (vertex, relation)'s in-degree in ``graph``, at ``vertex * R + relation``
    (int64, ``num_nodes * R``): counted per destination range in chunks of about 4M edges
    (the CSC groups each destination's edges)."""
    rels = max(len(graph.edge_types), 1)
    deg = graph.in_degree()
    if graph.type_per_edge is None or rels == 1:
        return deg.repeat_interleave(rels) if rels > 1 else deg.clone()
    out = torch.zeros(graph.num_nodes * rels, dtype=torch.int64)
    step, n = 1 << 22, graph.num_nodes
    cuts = torch.searchsorted(graph.indptr, torch.arange(step, max(graph.num_edges, step), step))
    lo = 0
    for hi in [*cuts.clamp(max=n).tolist(), n]:
        if hi <= lo:
            continue
        a, b = int(graph.indptr[lo]), int(graph.indptr[hi])
        dst = torch.repeat_interleave(torch.arange(hi - lo), deg[lo:hi])
        keys = dst * rels + torch.as_tensor(graph.type_per_edge[a:b]).long()
        out[lo * rels: hi * rels] = torch.bincount(keys, minlength=(hi - lo) * rels)
        lo = hi
    return out


def segment_csr(src: torch.Tensor, rows: torch.Tensor, w: torch.Tensor | None,
                size: tuple[int, int], dtype: torch.dtype) -> torch.Tensor:
    """:func:`~gnnscale.models.base.csr_matrix` of edges whose rows may be out of order but
    whose equal rows are contiguous (each (destination, relation)'s edges together, as a block
    groups them): each edge is placed by the row counts, no sort; other edges go through
    ``csr_matrix`` (a stable sort)."""
    n = rows.numel()
    if n < 2 or not bool((rows[1:] < rows[:-1]).any()):
        return csr_matrix(src, rows, w, size, dtype)
    n_src, n_rows = size
    new = torch.ones(n, dtype=torch.bool, device=rows.device)
    new[1:] = rows[1:] != rows[:-1]
    counts = torch.bincount(rows, minlength=n_rows)
    if int(new.sum()) != int((counts > 0).sum()):  # a row's edges are apart: sort them
        return csr_matrix(src, rows, w, size, dtype)
    crow = torch.zeros(n_rows + 1, dtype=torch.int64, device=rows.device)
    crow[1:] = counts.cumsum(0)
    at = torch.arange(n, device=rows.device)
    start = torch.cummax(torch.where(new, at, torch.zeros_like(at)), 0).values
    pos = crow[rows] + (at - start)
    col = torch.empty(n, dtype=torch.int64, device=rows.device)
    col[pos] = src.long()
    vals = torch.ones(n, dtype=dtype, device=rows.device)
    if w is not None:
        vals[pos] = w.to(dtype)
    with warnings.catch_warnings():  # "beta state" notices on every call
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, col, vals, (n_rows, n_src), check_invariants=False)
