"""``strategy.overlap``: a layer's exchange in flight while the rank computes what does not
need it, forward and backward (NeutronStar section 4.3), on edge-cuts and vertex-cuts.

A splittable model's aggregation is a sum over edges, so it splits by where each edge's source
row comes from (:class:`SourceGroups`): the rows the rank holds, and each peer's received rows.
The held group is summed while the exchange is in flight, each peer's group as its rows arrive
(:class:`~gnnscale.deps.pipeline.PeerExchange`); backward, each peer's gradient goes back as
soon as it is computed and the held group's backward runs while they travel. The partial sums
use the model's own edge weights (:meth:`~gnnscale.models.base.GNN.edge_weight`: graph-level
degrees, so they add up to the whole aggregate), its slots (:meth:`GNN.edge_slot`: an
aggregate of several sums per destination, R-GCN's) and its vertex-wise :meth:`pre`, as
:meth:`~gnnscale.models.base.GNN.aggregate` does. A model that cannot split (GAT) splits by
destination instead (:func:`split_by_destination`): the destinations that read only held rows
run while rows travel, the rest after.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from gnnscale.models.base import GNN, csr_matrix, slot_rows
from gnnscale.ops.sparse import FixedProduct as _FixedProduct
from gnnscale.ops.sparse import block_rows, blocked_mm, column_blocks
from gnnscale.sampling.base import Block


@dataclass
class SourceGroups:
    """Edges into ``num_dst`` destination rows, by source group: per group the edges' source
    column within that group's rows and destination row, and the group's row count."""

    edges: list[torch.Tensor]   # positions in the block's edge list, per group
    cols: list[torch.Tensor]
    dst: list[torch.Tensor]
    sizes: list[int]
    num_dst: int

    @staticmethod
    def build(group: torch.Tensor, col: torch.Tensor, dst: torch.Tensor, sizes: list[int],
              num_dst: int, keep: torch.Tensor | None = None) -> SourceGroups:
        """From per-edge ``group``, ``col`` (source row within its group) and ``dst`` row;
        ``keep`` (a mask over the edges) takes only some. Edge order is kept (grouped by
        destination, as the blocks are built)."""
        edges, cols, dsts = [], [], []
        for g in range(len(sizes)):
            sel = group == g if keep is None else (group == g) & keep
            pos = sel.nonzero().flatten()
            edges.append(pos)
            cols.append(col[pos])
            dsts.append(dst[pos])
        return SourceGroups(edges, cols, dsts, list(sizes), num_dst)

    def to(self, device: torch.device | str) -> SourceGroups:
        """The groups with their indices on ``device``."""
        return SourceGroups([e.to(device) for e in self.edges], [c.to(device) for c in self.cols],
                            [d.to(device) for d in self.dst], self.sizes, self.num_dst)

    def matrices(self, weights: torch.Tensor | None, dtype: torch.dtype,
                 slot: torch.Tensor | None = None, slots: int = 1) -> list[GroupSum]:
        """Per group its edges' weights as a :class:`GroupSum` (``weights``: one per block
        edge; None: ones; ``slot``: each block edge's slot of an aggregate of ``slots`` sums
        per destination, :meth:`GNN.aggregate_slots`)."""
        return [GroupSum.build(c, d, None if weights is None else weights[e], n, self.num_dst,
                               dtype, None if slot is None else slot[e], slots)
                for e, c, d, n in zip(self.edges, self.cols, self.dst, self.sizes)]


@dataclass
class GroupSum:
    """One source group's edges as a CSR matrix (and its transpose, for the backward) over
    only the destination rows they reach (``rows``; None: every row), so a peer whose rows
    reach few destinations costs its edges, not a pass over every destination row."""

    matrix: torch.Tensor | None  # None once cut into column blocks (`blocks`)
    matrix_t: torch.Tensor
    rows: torch.Tensor | None
    num_dst: int
    #: the aggregate's sums per destination: the matrix has ``slots`` rows per destination row
    slots: int = 1
    #: the matrix's column blocks once cut (then they serve every row width); None: whole
    blocks: list | None = None
    #: the row widths decided whole while the matrix is (:meth:`_blocks`)
    whole: set = field(default_factory=set)

    #: a group reaching at most this share of the destinations is summed into their rows only
    COMPACT = 0.5

    @staticmethod
    def build(col: torch.Tensor, dst: torch.Tensor, w: torch.Tensor | None, size: int,
              num_dst: int, dtype: torch.dtype, slot: torch.Tensor | None = None,
              slots: int = 1) -> GroupSum:
        """The group of edges ``(col[e] -> dst[e])`` with weights ``w`` from ``size`` rows
        (into slot ``slot[e]`` of ``slots`` per destination: :func:`slot_rows`)."""
        rows = torch.unique(dst)
        if rows.numel() > GroupSum.COMPACT * num_dst:
            rows, local, n = None, dst, num_dst
        else:
            local, n = torch.searchsorted(rows, dst), rows.numel()
        local, n = slot_rows(local, slot, slots), n * slots
        return GroupSum(csr_matrix(col, local, w, (size, n), dtype),
                        csr_matrix(local, col, w, (n, size), dtype), rows, num_dst, slots)

    def _product(self, x: torch.Tensor) -> torch.Tensor:
        blocks = self._blocks(x)
        out = _FixedProduct.apply(x, self.matrix, self.matrix_t) if blocks is None \
            else blocked_mm(blocks, self.matrix_t, x)
        return out if self.slots == 1 else out.view(out.shape[0] // self.slots, -1)

    def _blocks(self, x: torch.Tensor) -> list | None:
        """The matrix cut by ranges of ``x``'s rows that fit in cache (decided once per row
        width, :func:`~gnnscale.ops.sparse.block_rows`); None: one product. Once cut, the
        whole matrix is dropped (the blocks hold its entries) and the blocks serve every
        width."""
        width = x.shape[1] if x.dim() == 2 else 1
        if self.blocks is None and width not in self.whole:
            rows = block_rows(x.shape[0], width, x.element_size(), x.device,
                              self.matrix._nnz(), self.matrix.shape[0])
            if rows >= x.shape[0]:
                self.whole.add(width)
            else:
                self.blocks, self.matrix = column_blocks(self.matrix, rows), None
        return self.blocks

    def first(self, x: torch.Tensor) -> torch.Tensor:
        """The ``num_dst x d`` sum over this group's edges of rows ``x``."""
        out = self._product(x)
        if self.rows is None:
            return out
        return out.new_zeros((self.num_dst, out.shape[1])).index_add_(0, self.rows, out)

    def add_to(self, agg: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``agg`` plus this group's sum of rows ``x`` (in place)."""
        out = self._product(x)
        return agg.add_(out) if self.rows is None else agg.index_add_(0, self.rows, out)


def partial(model: GNN, layer: int, group: GroupSum, rows: torch.Tensor,
            normed: bool = False, into: torch.Tensor | None = None) -> torch.Tensor:
    """One group's share of :meth:`GNN.aggregate`, ``sum of w_uv * pre(rows)[u]``, added to
    ``into`` in place when given (``normed``: ``rows`` are already ``pre(rows)``)."""
    x = rows if normed else model.pre(layer, rows)
    return group.first(x) if into is None else group.add_to(into, x)


class WeightCache:
    """Matrices per (model, layer), built once: the edge weights are fixed by the bound
    graph."""

    def __init__(self) -> None:
        self._mats: dict[tuple[int, int, str], list[GroupSum]] = {}

    def get(self, model: GNN, layer: int, block: Block, groups: SourceGroups,
            name: str = "", dtype: torch.dtype = torch.float32) -> list[GroupSum]:
        """The group sums of ``groups`` with ``model``'s weights of ``layer`` on
        ``block``."""
        key = (id(model), layer, name)
        if key not in self._mats:
            with torch.no_grad():
                w = model.edge_weight(layer, block)
                slot = model.edge_slot(layer, block)
            self._mats[key] = groups.matrices(w, dtype, slot, model.aggregate_slots(layer))
        return self._mats[key]


# -- a model that cannot split its aggregation: split by destination -------------------------
def _sub_block(block: Block, gather: torch.Tensor, dsts: torch.Tensor
               ) -> tuple[Block, torch.Tensor]:
    """The part of ``block`` whose destinations are ``dsts`` (local ids), sources renumbered
    with those destinations first (its edges' ids, types and features kept); its gather from
    the same rows as ``gather``."""
    ei = block.edge_index
    keep = torch.zeros(block.num_dst, dtype=torch.bool)
    keep[dsts] = True
    mask = keep[ei[1]]
    e = ei[:, mask]
    used = torch.zeros(block.num_src, dtype=torch.bool)
    used[e[0]] = True
    used[dsts] = False
    src = torch.cat([dsts, used.nonzero().flatten()])
    spos = torch.full((block.num_src,), -1, dtype=torch.int64)
    spos[src] = torch.arange(src.numel())
    dpos = torch.full((block.num_dst,), -1, dtype=torch.int64)
    dpos[dsts] = torch.arange(dsts.numel())
    ids = None if block.src_ids is None else block.src_ids[src]
    sub = Block(torch.stack([spos[e[0]], dpos[e[1]]]), (src.numel(), dsts.numel()), ids,
                *(None if t is None else t[mask]
                  for t in (block.edge_weight, block.e_id, block.edge_type, block.edge_attr)))
    return sub, gather[src]


def split_by_destination(block: Block, gather: torch.Tensor, num_held: int,
                         device: torch.device | str
                         ) -> tuple[Block, torch.Tensor, Block, torch.Tensor, torch.Tensor]:
    """Destinations reading only held rows vs the rest (blocks and gathers), and the order
    that restores them."""
    ei = block.edge_index
    remote_src = gather[ei[0]] >= num_held
    needs_remote = torch.zeros(block.num_dst, dtype=torch.bool)
    needs_remote[ei[1][remote_src]] = True
    needs_remote |= gather[: block.num_dst] >= num_held  # its own row arrives too
    local_d = (~needs_remote).nonzero().flatten()
    rest_d = needs_remote.nonzero().flatten()
    b_local, g_local = _sub_block(block, gather, local_d)
    b_rest, g_rest = _sub_block(block, gather, rest_d)
    order = torch.empty(block.num_dst, dtype=torch.int64)
    order[torch.cat([local_d, rest_d])] = torch.arange(block.num_dst)
    return (b_local.to(device), g_local.to(device), b_rest.to(device), g_rest.to(device),
            order.to(device))
