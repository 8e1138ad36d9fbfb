"""Full-graph forward on a vertex-cut: master/mirror synchronisation (DeepGalois/Gluon).

Every edge lives on one rank (``book.edge_part``); every vertex has one master rank
(``book.part``). Per layer, a rank

1. holds the layer's input rows of the sources of its edges: its masters' rows, plus the
   *broadcast* of its mirrors' rows from their masters (layer 0 reads the raw input rows of
   every local vertex directly, as DeepGalois loads them, and encodes them: a typed graph's
   typed inputs through the model's :meth:`~gnnscale.models.base.GNN.encode`);
2. aggregates over its edges (``model.aggregate``: a sum whose partials add up exactly);
3. *reduces* the partial aggregates of destinations it does not master to their masters;
4. updates its masters (``model.update`` then ``model.post``: norm, activation, keyed dropout).

The sync sets follow from where the edges live: IEC (edges with their destination's master)
only broadcasts, OEC (with the source's master) only reduces, CVC and HVC do both (CVC within
the grid row and column). Both directions are the autograd :class:`~gnnscale.deps.shuffle
.Shuffle`: a broadcast's backward sums the mirrors' gradients into the master (a reduce), and a
reduce's backward sends the master's gradient back to every partial (a broadcast).

On a typed graph the local block carries its edges' ids (CSC positions) and types. A model
whose aggregation is its own (:func:`~.plan.sums_rows`: not the base weighted sum of source
rows, e.g. a sum per relation) runs its :meth:`~gnnscale.models.base.GNN.aggregate` on the
local block instead of the cached product, without overlap; the reduce sums its partials
whatever their width.

The aggregation over the local edges is one CSR product per layer, built once with its
transpose (torch's backward of a CSR product transposes the matrix, a sort, on every call).

With ``model.reorders(layer)`` (``reorder_update``), a layer transforms before aggregating and
broadcasts the transformed rows (DeepGalois 4.2: fewer bytes when the layer shrinks).

Local vertex order on rank ``r``: its masters (ascending), then the mirrors it reads as sources
(in broadcast-receive order: by master rank, then id), then the mirrors it only aggregates into
(ascending). The local block has these as both sources and destinations.

With ``overlap`` both syncs are peer exchanges (:mod:`gnnscale.deps.pipeline`) and the
aggregation is cut by where each edge's source comes from (this rank's rows, or each peer's
broadcast) and where its destination goes (a master here, or a partial reduced to its master;
:mod:`.overlap`). Per layer: the broadcast starts; the masters' and the reduced partials' sums
over local sources run while it travels; each peer's mirrors are summed into the reduced
partials as they arrive; the reduce starts; the masters' sums over the received mirrors run
while it travels; the arriving partials are added. Backward runs the mirror image: the reduce's
gradients travel while the masters' sums backpropagate, each peer's mirror gradients go back as
soon as they are complete, and the local sums backpropagate while they travel.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from gnnscale.data.graph import GraphStore
from gnnscale.deps.pipeline import PeerExchange
from gnnscale.deps.shuffle import ShuffleStats, shuffle
from gnnscale.distributed.launch import Topology
from gnnscale.models.base import GNN
from gnnscale.partition._graph import edge_src
from gnnscale.partition.book import PartitionBook
from gnnscale.partition.vc_parts import mirror_keys
from gnnscale.sampling.base import Block
from gnnscale.strategies.fullgraph.overlap import SourceGroups, WeightCache, partial
from gnnscale.strategies.fullgraph.plan import (
    FullGraphPlan,
    edge_fields,
    raw_bytes,
    raw_rows,
    sums_rows,
)


@dataclass
class SyncPlan:
    """One direction of master/mirror traffic for this rank, as a shuffle."""

    send_idx: torch.Tensor  # rows of the sent tensor, grouped by peer
    send_counts: list[int]
    recv_counts: list[int]
    recv_ids: torch.Tensor  # global ids of the received rows, in order
    active: bool  # some rank sends something (identical on every rank)


def _sync(keys: torch.Tensor, master: torch.Tensor, n: int, world: int, rank: int,
          toward_master: bool) -> SyncPlan:
    """The shuffle of one direction. ``keys`` = (holder, vertex) pairs sorted by holder then id.

    Broadcast (``toward_master=False``): masters send, holders receive; reduce: holders send,
    masters receive. Sent rows are named by global id (callers map them to local rows).
    """
    holder, vid = keys // n, keys % n
    owner = master[vid]
    mine_as_holder = holder == rank
    mine_as_owner = owner == rank
    # pairs this rank holds, by owner rank then id
    held = vid[mine_as_holder]
    held = held[torch.argsort(owner[mine_as_holder] * n + held)]
    held_counts = torch.bincount(master[held], minlength=world).tolist()
    # pairs this rank masters, by holder rank then id (keys' order)
    owned = vid[mine_as_owner]
    owned_counts = torch.bincount(holder[mine_as_owner], minlength=world).tolist()
    active = bool(keys.numel())
    if toward_master:
        return SyncPlan(held, held_counts, owned_counts, owned, active)
    return SyncPlan(owned, owned_counts, held_counts, held, active)


class VertexCutPlan(FullGraphPlan):
    """This rank's share of a full-graph forward on a vertex-cut partition book.

    ``VertexCutPlan(graph, book, model, topo, group=None, stats=None)``: ``graph`` the whole
    graph (features read for local vertices only), ``book`` a vertex-cut
    :class:`~gnnscale.partition.book.PartitionBook` with ``topo.world_size`` parts, ``model``
    a splittable :class:`~gnnscale.models.base.GNN` (its graph degrees are bound here),
    ``topo`` this rank's topology (rank, world, device), ``group`` the process group of the
    shuffles, ``stats`` an optional :class:`ShuffleStats` to count into (a fresh one if None;
    do not reset it between a forward and its backward), ``ring`` to move each broadcast and
    reduce as peer-ordered point-to-point steps instead of one all-to-all (NeutronStar's ring,
    in both directions of autograd), ``overlap`` to overlap both syncs with the local
    aggregation (module docstring; ``hide=False`` runs its computation with every message
    awaited at once, to measure what overlapping hides), ``cached=False`` to aggregate with
    ``model.aggregate`` (the matrix rebuilt and transposed by torch's backward on every call;
    to measure what caching saves). Set-up needs no communication: every rank derives all
    sync sets from the book. ``graph`` may be one part of a vertex-cut layout
    (:class:`~gnnscale.partition.vc_parts.VertexCutPart`: its edges, the rows it reads, its
    masters' mirror lists): the same sync sets, from the part alone.
    """

    def __init__(self, graph: GraphStore, book: PartitionBook, model: GNN, topo: Topology,
                 group: dist.ProcessGroup | None = None, stats: ShuffleStats | None = None,
                 ring: bool = False, overlap: bool = False, hide: bool = True,
                 cached: bool = True) -> None:
        check_vertex_cut(graph, book, model, topo.world_size)
        model.bind_graph(graph)
        n, world, rank = graph.num_nodes, topo.world_size, topo.rank
        self.group, self.device, self.num_layers = group, topo.device, model.num_layers
        self.ring = ring
        self.shuffle_stats = stats if stats is not None else ShuffleStats()
        master = book.part
        src = edge_src(graph)
        dst = torch.repeat_interleave(torch.arange(n), graph.indptr[1:] - graph.indptr[:-1])
        keys = getattr(graph, "sync_keys", None)  # a part of a vertex-cut layout
        ep = book.edge_part.long() if keys is None else torch.full_like(src, rank)
        self.masters = torch.nonzero(master == rank).flatten()
        self.bcast = _sync(self._keys(ep, src, master, graph, "bcast"), master, n, world, rank,
                           False)
        self.reduce = _sync(self._keys(ep, dst, master, graph, "reduce"), master, n, world,
                            rank, True)
        if keys is not None:  # whether any rank sends: the layout's, not this part's
            self.bcast.active = graph.sync_active["bcast"]
            self.reduce.active = graph.sync_active["reduce"]
        # local vertex order: masters, broadcast-received mirrors, aggregate-only mirrors
        local = torch.zeros(n, dtype=torch.bool)
        local[self.masters] = True
        local[self.bcast.recv_ids] = True
        only_dst = self.reduce.send_idx[~local[self.reduce.send_idx]]
        self.local_ids = torch.cat([self.masters, self.bcast.recv_ids, torch.sort(only_dst)[0]])
        pos = torch.full((n,), -1, dtype=torch.int64)
        pos[self.local_ids] = torch.arange(self.local_ids.numel())
        mpos = torch.full((n,), -1, dtype=torch.int64)
        mpos[self.masters] = torch.arange(self.masters.numel())
        # broadcast sends master rows; reduce sends local aggregate rows, received into masters
        self.bcast.send_idx = mpos[self.bcast.send_idx]
        self.reduce.send_idx = pos[self.reduce.send_idx]
        self.reduce_into = mpos[self.reduce.recv_ids].to(self.device)
        mine = torch.nonzero(ep == rank).flatten()
        ei = torch.stack([pos[src[mine]], pos[dst[mine]]])
        nl = self.local_ids.numel()
        block = Block(ei, (nl, nl), self.local_ids)
        if graph.is_typed:
            edge_fields(graph, block, mine, None)
        self.block = block.to(self.device)
        self.num_read = self.masters.numel() + self.bcast.recv_ids.numel()
        self.x = raw_rows(graph, self.local_ids[: self.num_read]).to(self.device)
        self._cached_bytes = raw_bytes(graph, self.x, self.masters.numel())
        self.masters_dev = self.masters.to(self.device)
        self._fwd_bytes = 0
        self._mark = self.shuffle_stats.bytes_sent
        # a model that aggregates its own way runs its own aggregate, awaited (plan.sums_rows)
        cached = cached and sums_rows(model)
        self.overlap, self.hide = overlap and world > 1 and sums_rows(model), hide
        self._weights = WeightCache()
        # every edge's source is read (a master or a broadcast mirror): num_read rows
        self._whole = SourceGroups.build(torch.zeros_like(ei[0]), ei[0], ei[1],
                                         [self.num_read], nl).to(self.device) if cached else None
        if self.overlap:
            self._pipelined(ei, model.num_layers, world)

    @staticmethod
    def _keys(ep: torch.Tensor, end: torch.Tensor, master: torch.Tensor, graph: GraphStore,
              direction: str) -> torch.Tensor:
        """One direction's (holder, node) keys this rank's sync reads: from every edge, or on
        a part of a vertex-cut layout from its own edges and its masters' mirror list (the
        keys of the other holders of its masters: all :func:`_sync` reads of them)."""
        keys = mirror_keys(ep, end, master, graph.num_nodes)
        part = getattr(graph, "sync_keys", None)
        return keys if part is None else torch.unique(torch.cat([keys, part[direction]]))

    def _pipelined(self, ei: torch.Tensor, layers: int, world: int) -> None:
        """The overlapped syncs of every layer (own tags) and the local edges by source group
        and destination kind."""
        nm, dev = self.masters.numel(), self.device
        b, r = self.bcast, self.reduce
        self._bcast_ex = [PeerExchange(b.send_idx, b.send_counts, b.recv_counts, self.group,
                                       self.shuffle_stats, self.ring, tag=4 * i,
                                       hide=self.hide).to(dev)
                          for i in range(layers)]
        n_send = r.send_idx.numel()
        self._reduce_ex = [PeerExchange(torch.arange(n_send), r.send_counts, r.recv_counts,
                                        self.group, self.shuffle_stats, self.ring,
                                        tag=4 * i + 2, hide=self.hide).to(dev)
                           for i in range(layers)]
        roff = torch.tensor([0] + r.recv_counts).cumsum(0).tolist()
        into = self.reduce_into
        self._reduce_into = {q: into[roff[q]:roff[q + 1]] for q in range(world)
                             if r.recv_counts[q]}
        src, dst = ei
        nl = self.local_ids.numel()
        send_row = torch.full((nl,), -1, dtype=torch.int64)
        send_row[r.send_idx] = torch.arange(n_send)
        to_master = dst < nm
        row = torch.where(to_master, dst, send_row[dst])
        # layer 0 reads every local source's features: one group
        zero = torch.zeros_like(src)
        # later layers: this rank's masters, or the broadcast rows of peer p (group 1 + p)
        boff = torch.tensor([0] + b.recv_counts).cumsum(0)
        mirror = src >= nm
        peer = torch.searchsorted(boff[1:], src - nm, right=True)
        group = torch.where(mirror, 1 + peer, zero)
        col = torch.where(mirror, src - nm - boff[peer.clamp(max=world - 1)], src)
        sizes = [nm] + list(b.recv_counts)
        self._groups = {
            ("first", "master"): SourceGroups.build(zero, src, row, [self.num_read], nm,
                                                    to_master),
            ("first", "send"): SourceGroups.build(zero, src, row, [self.num_read], n_send,
                                                  ~to_master),
            ("later", "master"): SourceGroups.build(group, col, row, sizes, nm, to_master),
            ("later", "send"): SourceGroups.build(group, col, row, sizes, n_send, ~to_master),
        }
        self._groups = {k: g.to(dev) for k, g in self._groups.items()}

    # ---- one epoch ---------------------------------------------------------------------------
    def _broadcast(self, rows: torch.Tensor) -> torch.Tensor:
        """Master rows -> ``cat(master rows, mirror rows)`` in local order."""
        b = self.bcast
        if not b.active:
            return rows
        recv = shuffle(rows, b.send_idx, b.send_counts, b.recv_counts, self.group,
                       self.shuffle_stats, self.ring)
        return torch.cat([rows, recv])

    def _reduce(self, agg: torch.Tensor) -> torch.Tensor:
        """Local partial aggregates -> the masters' full aggregates."""
        r = self.reduce
        own = agg[: self.masters.numel()]
        if not r.active:
            return own
        recv = shuffle(agg, r.send_idx, r.send_counts, r.recv_counts, self.group,
                       self.shuffle_stats, self.ring)
        return own.index_add(0, self.reduce_into, recv)

    def forward(self, model: GNN) -> torch.Tensor:
        """This rank's logits of its masters, synchronising masters and mirrors per layer."""
        before = self.shuffle_stats.bytes_sent
        nm, nl = self.masters.numel(), self.local_ids.numel()
        x = model.inputs(model.encode(self.x), self.local_ids[: self.num_read])
        h = x[:nm]
        if self.overlap:
            h = self._forward_overlapped(model, x, h)
            self._fwd_bytes += self.shuffle_stats.bytes_sent - before
            return h
        for i in range(model.num_layers):
            reorder = model.reorders(i)
            if i == 0:  # input features of every local source are read, not sent
                y = model.transform(0, x) if reorder else x
            else:
                y = self._broadcast(model.transform(i, h) if reorder else h)
            if self._whole is None:
                y = torch.cat([y, y.new_zeros((nl - y.shape[0], y.shape[1]))])
                agg = self._reduce(model.aggregate(i, y, self.block))
            else:
                mat = self._weights.get(model, i, self.block, self._whole, "whole", y.dtype)
                agg = self._reduce(partial(model, i, mat[0], y))
            out = model.update(i, agg, h, self.masters_dev, y[:nm] if reorder else None)
            h = model.post(i, out, self.masters_dev)
        self._fwd_bytes += self.shuffle_stats.bytes_sent - before
        return h

    def _matrices(self, model: GNN, i: int, which: str) -> tuple[list, list]:
        """Layer ``i``'s matrices into masters and into reduced partials, ``which`` sources."""
        w = self._weights
        return (w.get(model, i, self.block, self._groups[which, "master"], which + "/master"),
                w.get(model, i, self.block, self._groups[which, "send"], which + "/send"))

    def _forward_overlapped(self, model: GNN, x: torch.Tensor, h: torch.Tensor
                            ) -> torch.Tensor:
        """The layers with both syncs overlapped with the local aggregation."""
        nm = self.masters.numel()
        reduce_on = self.reduce.active
        for i in range(model.num_layers):
            reorder = model.reorders(i)
            bcast_on = i > 0 and self.bcast.active
            own = x if i == 0 else h
            own = model.transform(i, own) if reorder else own
            to_master, to_send = self._matrices(model, i, "first" if i == 0 else "later")
            mine = model.pre(i, own)  # what the sums read: pre once, so normed=True below
            started = []
            if bcast_on:
                sb = self._bcast_ex[i].start(own)
                started.append(sb)
                agg = partial(model, i, to_master[0], mine, normed=True)
                part = partial(model, i, to_send[0], mine, normed=True) if reduce_on else None
                got = {}
                for p, rows in self._bcast_ex[i].arrivals(sb):
                    got[p] = model.pre(i, rows)
                    if reduce_on:
                        part = partial(model, i, to_send[1 + p], got[p], normed=True,
                                       into=part)
                if reduce_on:
                    started.append(self._reduce_ex[i].start(part))
                for p, rows in got.items():
                    agg = partial(model, i, to_master[1 + p], rows, normed=True, into=agg)
            else:
                if reduce_on:
                    started.append(self._reduce_ex[i].start(
                        partial(model, i, to_send[0], mine, normed=True)))
                agg = partial(model, i, to_master[0], mine, normed=True)
            if reduce_on:
                for q, rows in self._reduce_ex[i].arrivals(started[-1]):
                    agg = agg.index_add_(0, self._reduce_into[q], rows)
            out = model.update(i, agg, h, self.masters_dev, own[:nm] if reorder else None)
            h = model.post(i, out, self.masters_dev)
            for s in started:
                h = PeerExchange.join(h, s)
        return h

    def stats(self) -> dict[str, float]:
        """Edges computed and rows synchronised in the last pass."""
        s = self.shuffle_stats
        total = s.bytes_sent - self._mark
        out = {
            "bytes_forward": float(self._fwd_bytes),
            "bytes_backward": float(total - self._fwd_bytes),
            "comm_seconds": s.seconds,
            "edges_computed": float(self.block.num_edges * self.num_layers),
            "vertex_updates": float(self.masters.numel() * self.num_layers),
            "replicated_rows": float(self.local_ids.numel() - self.masters.numel()),
            "broadcast_rows": float(self.bcast.recv_ids.numel()),
            "reduce_rows": float(self.reduce.send_idx.numel()),
            "cached_feature_bytes": float(self._cached_bytes),
        }
        self._fwd_bytes, self._mark = 0, s.bytes_sent
        return out


def check_vertex_cut(graph: GraphStore, book: PartitionBook, model: GNN, world: int) -> None:
    """Clear errors, before training, for what a vertex-cut plan cannot run."""
    if book.kind != "vertex_cut" or book.edge_part is None:
        raise ValueError(f"VertexCutPlan needs a vertex-cut partition book (partitioner oec, "
                         f"iec, cvc or hvc), got kind={book.kind!r}")
    if book.num_parts != world:
        raise ValueError(f"the partition book has {book.num_parts} parts but the run has "
                         f"{world} ranks: repartition with num_parts={world}")
    part = getattr(graph, "sync_keys", None) is not None  # its edges are the part's own
    if book.num_nodes != graph.num_nodes or \
            not part and book.edge_part.numel() != graph.num_edges:
        raise ValueError(f"the partition book covers {book.num_nodes} vertices and "
                         f"{book.edge_part.numel()} edges, the graph has {graph.num_nodes} and "
                         f"{graph.num_edges}: it belongs to another graph, repartition")
    if graph.x is None and not graph.is_typed:
        raise ValueError("a vertex-cut full-graph run needs input features (graph.x)")
    model.check_splittable()
    if any(isinstance(m, nn.BatchNorm1d) for m in model.norms):
        raise ValueError("model.norm=batch normalises by statistics over each rank's masters, "
                         "not the whole graph: use model.norm=layer or none on a vertex-cut")
