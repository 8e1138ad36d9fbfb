"""Online split of one shared mini-batch (GSplit): the native ``split_sample`` op, wrapped.

Every vertex of every layer of the sample gets one owner rank: layer 0 by ``own_in`` (the rank
caching its feature, else its partition), the others by the partition book (``own_part``,
looked up densely by global id). A rank's :class:`SplitPlan` lists the layer-0 rows it loads,
and per layer its local block (destinations first, sources, then one virtual row per
pre-aggregated (destination, sender)), where each local source row comes from (its own rows
or the shuffle) and the shuffle's send/receive lists. Asked with ``edge_ids=True`` (a model
that reads edge features, or a typed graph's relations), the native split also returns each
local edge's position in the sample's block, and the plan's local blocks carry the sample's
``e_id`` and ``edge_type`` at those positions (a pre-aggregated edge keeps its original edge's);
without it (the homogeneous path) nothing is recorded and the local blocks carry neither.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnscale.ops import split as native_split
from gnnscale.sampling import codec
from gnnscale.sampling.base import Block, MiniBatch

_PER_LAYER = 8


@dataclass
class LayerPlan:
    """One layer on one rank: ``x = cat(h, recv)[gather]``, then the conv on ``block``."""

    block: Block
    dst: torch.Tensor          # sample ids of the destinations this rank computes
    gather: torch.Tensor       # each local source row -> row of cat(h, received rows)
    send_idx: torch.Tensor     # rows of cat(h, aggregated slots) sent, peer by peer
    send_counts: list[int]
    recv_counts: list[int]
    agg_row: torch.Tensor      # pre-aggregation: h rows summed ...
    agg_slot: torch.Tensor     # ... into these slots ...
    slot_count: torch.Tensor   # ... each the mean of this many edges
    scale: torch.Tensor | None = None  # per-source-row factor (GCN block normalisation)
    #: whether any rank receives a row in this layer's shuffle (False: every rank skips it)
    moves: bool = True


@dataclass
class SplitPlan:
    """What one rank does with one shared sample."""

    loaded: torch.Tensor       # sample ids of the layer-0 rows this rank loads
    layers: list[LayerPlan]
    edges_per_rank: list[int]  # edges each rank computes
    local_edges: int           # sample edges whose source and destination have one owner
    total_edges: int
    replicated: int            # remote rows this rank recomputes (hybrid)
    loaded_ids: torch.Tensor   # global ids of the loaded rows
    target_ids: torch.Tensor   # global ids of the targets this rank computes the loss of
    num_targets: int           # targets of the whole mini-batch (the loss's divisor)

    @property
    def targets(self) -> torch.Tensor:
        """Sample ids of the targets this rank computes the loss of."""
        return self.layers[-1].dst


def sample_counts(mb: MiniBatch) -> torch.Tensor:
    """Vertices per layer in sampler order: targets first, input layer last."""
    sizes = [mb.blocks[-1].num_dst] + [b.num_src for b in reversed(mb.blocks)]
    return torch.tensor(sizes, dtype=torch.int64)


def _gcn_block_scale(mb_block: Block, local: Block, src: torch.Tensor) -> torch.Tensor:
    """Row factors that turn local block degrees into the whole sample's (exact for GCN).

    GCN weighs edge (u, v) by deg_out(u)^-1/2 deg_in(v)^-1/2, counted in the block with self
    loops; a destination has all its in-edges locally, a source only some of its out-edges.
    GCNConv transforms rows linearly before weighting, so scaling source row u by
    sqrt(local deg_out / sample deg_out) gives the sample's weights exactly.
    """
    n_src, n_dst = mb_block.size
    full = torch.bincount(mb_block.edge_index[0], minlength=n_src).double()
    full[:n_dst] += 1
    ln_src, ln_dst = local.size
    loc = torch.bincount(local.edge_index[0], minlength=ln_src).double()
    loc[:ln_dst] += 1
    return (loc / full[src]).clamp_min(0).sqrt().float()


def split_sample(mb: MiniBatch, own_in: torch.Tensor, own_part: torch.Tensor, world: int,
                 rank: int, *, preagg: bool = False, costs: torch.Tensor | None = None,
                 budget: int = 0, gcn_block_norm: bool = False,
                 edge_ids: bool = False, read_inputs: bool = False) -> SplitPlan:
    """Split ``mb`` over ``world`` ranks; the plan of rank ``rank``.

    ``own_in``/``own_part`` map global ids to ranks (layer 0 / other layers). ``costs`` holds
    3 x (L + 1) per-layer figures (row communication, per-edge and per-vertex compute) for the
    hybrid greedy; ``budget`` caps the rows a rank replicates (0 = communicate everything).
    ``edge_ids``: the local blocks carry the sample's ``e_id`` / ``edge_type`` of their edges.
    ``read_inputs``: every rank reads its layer-0 block's sources itself (``strategy.inputs``
    read), so layer 0 is not shuffled: the plan has no loaded rows and layer 0 no shuffle.
    """
    edge_ids = edge_ids and _has_edge_ids(mb)
    out = native_split.split_sample(*_native_args(mb, own_in, own_part), world, rank,
                                    preagg, _costs(mb, costs), int(budget), 0, edge_ids,
                                    read_inputs)
    return _plan(mb, out, world, gcn_block_norm, edge_ids)


def split_sample_all(mb: MiniBatch, own_in: torch.Tensor, own_part: torch.Tensor, world: int,
                     *, preagg: bool = False, costs: torch.Tensor | None = None,
                     budget: int = 0, gcn_block_norm: bool = False,
                     edge_ids: bool = False, read_inputs: bool = False) -> list[SplitPlan]:
    """Every rank's :func:`split_sample` plan of ``mb``, rank 0 first, planned once (what a
    parallel split-sampler computes for the step it sampled)."""
    edge_ids = edge_ids and _has_edge_ids(mb)
    outs = native_split.split_sample_all(*_native_args(mb, own_in, own_part), world,
                                         preagg, _costs(mb, costs), int(budget), 0, edge_ids,
                                         read_inputs)
    return [_plan(mb, out, world, gcn_block_norm, edge_ids) for out in outs]


def _has_edge_ids(mb: MiniBatch) -> bool:
    """Whether the sample's blocks carry edge ids or types (what a local block can take)."""
    return any(b.e_id is not None or b.edge_type is not None for b in mb.blocks)


def _native_args(mb: MiniBatch, own_in: torch.Tensor, own_part: torch.Tensor) -> tuple:
    """The sample's counts and edges and its input vertices' owners, as the native ops take
    them."""
    ids = mb.n_id[: mb.blocks[0].num_src]
    part = own_part[ids].int()
    return (sample_counts(mb), [b.edge_index for b in mb.blocks],
            part if own_in is own_part else own_in[ids].int(), part)


def _costs(mb: MiniBatch, costs: torch.Tensor | None) -> torch.Tensor:
    """``costs``, or zeros (communicate everything) for the sample's layers."""
    return torch.zeros(3 * (len(mb.blocks) + 1), dtype=torch.float64) if costs is None \
        else costs


def _plan(mb: MiniBatch, out: list[torch.Tensor], world: int, gcn_block_norm: bool,
          edge_ids: bool = False) -> SplitPlan:
    """A :class:`SplitPlan` from the native op's flat list for one rank (``edge_ids``: the
    list ends with each layer's local edge positions in the sample's block)."""
    stats = out[1].tolist()
    layers = []
    num_layers = len(mb.blocks)
    for i in range(num_layers):
        dst, src, ei, gather, send_idx, send_c, recv_c, agg = out[2 + _PER_LAYER * i:
                                                                 2 + _PER_LAYER * (i + 1)]
        n_slots = int((agg[2] > 0).sum())
        block = Block(ei, (src.numel(), dst.numel()), mb.n_id[src])
        if edge_ids:  # the sample's edge ids and types at each local edge's position
            pos, whole = out[2 + _PER_LAYER * num_layers + i], mb.blocks[i]
            block.e_id = None if whole.e_id is None else whole.e_id[pos]
            block.edge_type = None if whole.edge_type is None else whole.edge_type[pos]
        scale = _gcn_block_scale(mb.blocks[i], block, src) if gcn_block_norm else None
        layers.append(LayerPlan(block, dst, gather, send_idx, send_c.tolist(), recv_c.tolist(),
                                agg[0], agg[1], agg[2][:n_slots], scale,
                                moves=stats[world + 3 + i] > 0))
    return SplitPlan(out[0], layers, stats[:world], stats[world], stats[world + 1],
                     stats[world + 2], mb.n_id[out[0]], mb.n_id[layers[-1].dst], mb.num_targets)


# -- one rank's plan on the wire (parallel split-samplers) ----------------------------------
def pack_plan(plan: SplitPlan) -> torch.Tensor:
    """What a rank needs of its ``plan`` as one int32 tensor (int64 where an id does not fit;
    float factors bit for bit): what it receives from the rank that sampled and split the
    step. The layers' blocks travel in the mini-batch codec's block encoding
    (:func:`gnnscale.sampling.codec.encode_blocks`); sample-local ids the rank does not use
    (``loaded``, ``dst``) stay behind; :func:`unpack_plan` reverses it."""
    world = len(plan.edges_per_rank)
    blocks = [lp.block for lp in plan.layers]
    block_head, block_parts = codec.encode_blocks(blocks)
    head = [len(plan.layers), world, plan.local_edges, plan.total_edges, plan.replicated,
            plan.num_targets, *plan.edges_per_rank, *block_head]
    parts = [plan.loaded_ids, plan.target_ids, *block_parts]
    for lp in plan.layers:
        parts += [lp.gather, lp.send_idx, lp.agg_row, lp.agg_slot, lp.slot_count,
                  _NONE if lp.scale is None else lp.scale.float().view(torch.int32)]
        head += [*lp.send_counts, *lp.recv_counts, int(lp.scale is not None), int(lp.moves)]
    n_blocks = len(block_parts)  # travel as one part (decoded together)
    sizes = [p.numel() for p in parts]
    head += sizes[:2] + [sum(sizes[2:2 + n_blocks])] + sizes[2 + n_blocks:]
    # int32 unless a global id (or edge id) does not fit: sample-local ids are below the
    # sample's vertex and edge counts, so only those parts are scanned
    local_bound = max([b.num_src for b in blocks] + [b.num_edges for b in blocks] + [0])
    wide = local_bound > _I32 or any(
        p.numel() and (int(p.max()) > _I32 or int(p.min()) < 0) for p in _global_parts(plan))
    dtype = torch.int64 if wide else torch.int32
    out = torch.empty(2 + len(head) + sum(sizes), dtype=dtype)
    out[:2 + len(head)] = torch.tensor([int(wide), len(head)] + head, dtype=dtype)
    at = 2 + len(head)
    for p, n in zip(parts, sizes):
        out[at: at + n].copy_(p.reshape(-1))  # converted as it is copied
        at += n
    return out


def _global_parts(plan: SplitPlan) -> list[torch.Tensor]:
    """The parts of ``plan`` that hold global ids (vertices, edges), not sample-local ones."""
    parts = [plan.loaded_ids, plan.target_ids]
    for lp in plan.layers:
        parts += [t for t in (lp.block.src_ids, lp.block.e_id) if t is not None]
    return parts


_I32 = 2**31 - 1
_NONE = torch.empty(0, dtype=torch.int32)  # an absent part
_PLAN_PARTS = 6  # per layer: gather, send_idx, agg_row, agg_slot, slot_count, scale


def unpack_plan(buf: torch.Tensor) -> SplitPlan:
    """The :class:`SplitPlan` that :func:`pack_plan` wrote into ``buf`` (``loaded`` and each
    layer's ``dst`` empty: they are sample-local ids the receiving rank does not use)."""
    n_head = int(buf[1])
    head, body = buf[2: 2 + n_head].tolist(), buf[2 + n_head:].long()
    n_layers, world, local, total, replicated, num_targets = head[:6]
    edges, pos = head[6: 6 + world], 6 + world
    block_head = head[pos: pos + codec.PER_BLOCK * n_layers]
    pos += codec.PER_BLOCK * n_layers
    per_layer = []
    for _ in range(n_layers):
        send = head[pos: pos + world]
        recv = head[pos + world: pos + 2 * world]
        per_layer.append((send, recv, bool(head[pos + 2 * world]),
                          bool(head[pos + 2 * world + 1])))
        pos += 2 + 2 * world
    sizes = head[pos:]
    tensors, at = [], 0
    for n in sizes:
        tensors.append(body[at: at + n])
        at += n
    loaded_ids, target_ids = tensors[:2]
    blocks = codec.decode_blocks(block_head, tensors[2])
    empty = torch.empty(0, dtype=torch.int64)
    layers = []
    for i, (block, (send, recv, scaled, moves)) in enumerate(zip(blocks, per_layer)):
        gather, send_idx, agg_row, agg_slot, count, scale = \
            tensors[3 + _PLAN_PARTS * i: 3 + _PLAN_PARTS * (i + 1)]
        factor = scale.to(torch.int32).view(torch.float32) if scaled else None
        layers.append(LayerPlan(block, empty, gather, send_idx, send, recv, agg_row, agg_slot,
                                count, factor, moves))
    return SplitPlan(empty, layers, edges, local, total, replicated, loaded_ids, target_ids,
                     num_targets)
