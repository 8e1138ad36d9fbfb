"""Full-graph forward on an edge-cut: DepCache, DepComm and the hybrid (NeutronStar).

The dependency planner (:mod:`gnnscale.deps.planner`) says which rows this rank holds at each
layer and which it receives. Here that becomes, per conv, a local block (destinations = the
rows held at the next layer, masters first; sources = destinations, then the other rows read),
a gather from ``cat(held rows, received rows)`` into the block's source order, and the
shuffle's send lists (exchanged with the owners once, at set-up). A splittable model's conv
runs as its aggregation (one CSR product over the block, built once with its transpose, so
the backward does not transpose the matrix on every call as torch's CSR product does) and
its update; a model that cannot split (GAT) runs its own conv. With ``overlap`` the exchange
is a :class:`~gnnscale.deps.pipeline.PeerExchange` consumed as it arrives
(:mod:`.overlap`): forward, the held rows' share of the aggregation runs while rows travel
and each peer's share as its rows arrive; backward, each peer's gradient is sent as soon as it
is computed and the held share's backward runs while they travel.

Layer 0 reads raw rows held at set-up and encodes them first (:meth:`GNN.encode`: a typed
graph's typed inputs become ``hidden``-wide rows through the model's per-type maps and
embedding tables), so an exchange of layer-0 rows sends encoded rows, and its backward sends
their gradients back to the owner, into its encoding. A typed graph's blocks carry their
edges' ids and types; a model that reads edge features gets each block's rows of them,
gathered once at set-up, and runs its own conv (a split aggregate reads no edge features);
so does a splittable model that aggregates its own way (:func:`~.plan.sums_rows`: the cached
products compute only the base weighted sum of source rows).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from gnnscale.cache.edges import EdgeFeatures
from gnnscale.data.graph import GraphStore
from gnnscale.deps.base import DependencyManager
from gnnscale.deps.pipeline import PeerExchange
from gnnscale.deps.planner import EdgeCutLayout, in_edges, plan_edge_cut
from gnnscale.deps.shuffle import ShuffleStats, shuffle
from gnnscale.distributed.collectives import all_reduce_host, all_to_all_host
from gnnscale.models.base import GNN
from gnnscale.sampling.base import Block
from gnnscale.strategies.fullgraph.overlap import (
    SourceGroups,
    WeightCache,
    partial,
    split_by_destination,
)
from gnnscale.strategies.fullgraph.plan import (
    FullGraphPlan,
    edge_fields,
    in_edge_ids,
    raw_bytes,
    raw_rows,
    sums_rows,
)


@dataclass
class ConvStep:
    """Conv ``k``: shuffle layer-``k`` rows, gather the block's sources, run the conv."""

    block: Block
    gather: torch.Tensor | None       # source row -> row of cat(held, received); None = same
    send_idx: torch.Tensor
    send_counts: list[int]
    recv_counts: list[int]
    exchange: bool                    # any rank receives rows at this layer
    pipe: Pipelined | None = None     # overlap: the exchange consumed as it arrives
    dst_own: torch.Tensor | None = None  # the destinations' rows in cat(held, received)
    #                                        (None: the first rows)
    whole: SourceGroups | None = None  # the block's edges as one group of cat(held, received)
    src_ids: torch.Tensor | None = None  # global ids of the rows of cat(held, received)


@dataclass
class Pipelined:
    """What an overlapped conv needs besides its block: the exchange, the edges by source
    group (held rows, then each peer's), the global ids of the held and received rows (keyed
    dropout on layer 0's inputs), the destinations' own rows in ``cat(held, received)``, and
    the host block and gather to split by destination for models that cannot split."""

    exchange: PeerExchange
    groups: SourceGroups
    held_ids: torch.Tensor
    recv_ids: dict[int, torch.Tensor]
    dst_own: torch.Tensor
    dst_held: bool
    dst_first: bool
    host: tuple[Block, torch.Tensor, int]
    by_destination: tuple | None = None


def exchange_requests(recv: torch.Tensor, recv_counts: list[int], group: dist.ProcessGroup | None
                      ) -> tuple[torch.Tensor, list[int]]:
    """Tell each owner which of its rows this rank receives; returns what this rank sends."""
    world = len(recv_counts)
    counts = torch.tensor(recv_counts, dtype=torch.int64)
    send_counts = torch.empty_like(counts)
    all_to_all_host(send_counts, counts, group=group)
    send_counts = send_counts.tolist()
    wanted = torch.empty(sum(send_counts), dtype=torch.int64)
    all_to_all_host(wanted, recv.long().contiguous(), send_counts, recv_counts, group=group)
    assert len(send_counts) == world
    return wanted, send_counts


def _conv_block(graph: GraphStore, dst: torch.Tensor, held: torch.Tensor, recv: torch.Tensor,
                edges: EdgeFeatures | bool | None = None) -> tuple[Block, torch.Tensor]:
    """Block of conv on ``dst`` (sources: ``dst`` first) and its gather from ``[held, recv]``;
    ``edges`` (True, or the gatherer of a model's edge features): the block carries its
    edges' ids, types and features (:func:`~.plan.edge_fields`)."""
    n = graph.num_nodes
    src, dpos = in_edges(graph, dst)
    is_dst = torch.zeros(n, dtype=torch.bool)
    is_dst[dst] = True
    read = torch.zeros(n, dtype=torch.bool)
    read[src] = True
    src_ids = torch.cat([dst, (read & ~is_dst).nonzero().flatten()])
    spos = torch.full((n,), -1, dtype=torch.int64)
    spos[src_ids] = torch.arange(src_ids.numel())
    lpos = torch.full((n,), -1, dtype=torch.int64)
    lpos[held] = torch.arange(held.numel())
    lpos[recv] = held.numel() + torch.arange(recv.numel())
    gather = lpos[src_ids]
    if bool((gather < 0).any()):
        raise RuntimeError("dependency plan is missing rows a conv reads (planner bug)")
    block = Block(torch.stack([spos[src], dpos]), (src_ids.numel(), dst.numel()), src_ids)
    if edges:
        edge_fields(graph, block, in_edge_ids(graph, dst),
                    edges if isinstance(edges, EdgeFeatures) else None)
    return block, gather


class EdgeCutPlan(FullGraphPlan):
    """One rank's full-graph forward on an edge-cut partition, dependencies per ``deps``.

    Collective at construction (send lists, global traffic flags; Hybrid's cost probe).
    ``ring``: peer-ordered exchange; ``overlap``: each exchange overlaps the computation that
    does not need it, forward and backward (module docstring); ``hide=False`` runs overlap's
    computation with every message awaited at once (to measure what overlapping hides);
    ``cached=False`` runs the conv's own product instead of the cached one (torch's backward
    then transposes the matrix on every call; to measure what caching saves).
    ``sparse_edges``: the model aggregates by a sparse product (the cost probe prices an edge
    so). ``edge_features``: the model reads edge features; its blocks carry them, gathered once
    here (``edge_bytes``). On a typed graph the blocks carry their edges' ids and types, and
    ``x`` holds typed inputs (:func:`~.plan.raw_rows`).
    """

    def __init__(self, graph: GraphStore, part: torch.Tensor, rank: int, world: int,
                 deps: DependencyManager, dims: list[int],
                 group: dist.ProcessGroup | None = None, ring: bool = False,
                 overlap: bool = False, device: torch.device | str = "cpu",
                 budget: int | None = None, hide: bool = True, cached: bool = True,
                 edge_features: bool = False, sparse_edges: bool = True) -> None:
        self.group, self.ring, self.overlap, self.world = group, ring, overlap, world
        self.cached, self.edge_features = cached, edge_features
        self.hide = hide  # False: overlap's computation, messages awaited at once (to measure)
        lc = None
        if not (deps.replicates_all or deps.replicates_none) and world > 1:
            deps.prepare(group=group, sparse=sparse_edges)
            lc = deps.layer_costs(dims)
        self.layout: EdgeCutLayout = plan_edge_cut(graph, part, rank, world, deps, dims, lc,
                                                   budget, group=group)
        lay = self.layout
        self.masters = lay.masters
        self.dims, self.device = dims, device
        self.x = raw_rows(graph, lay.rows[0]).to(device)
        self._cached_bytes = raw_bytes(graph, self.x, lay.masters.numel())
        gatherer = EdgeFeatures(graph) if edge_features else None
        edges = gatherer if gatherer is not None else graph.is_typed
        #: bytes of the edge features the blocks hold (gathered once, here)
        self.edge_bytes = 0
        totals = torch.tensor([r.numel() for r in lay.recv], dtype=torch.int64)
        if world > 1:
            all_reduce_host(totals, group=group)
        self.steps: list[ConvStep] = []
        gather_of: list[tuple[Block, torch.Tensor]] = []
        for k in range(len(dims) - 1):
            block, gather = _conv_block(graph, lay.rows[k + 1], lay.rows[k], lay.recv[k],
                                        edges)
            gather_of.append((block, gather))
            send_idx, send_counts = torch.zeros(0, dtype=torch.int64), [0] * world
            if totals[k] > 0:
                wanted, send_counts = exchange_requests(lay.recv[k], lay.recv_counts[k], group)
                send_idx = torch.searchsorted(self.masters, wanted)
            ident = gather.numel() == lay.rows[k].numel() + lay.recv[k].numel() and \
                bool((gather == torch.arange(gather.numel())).all())
            step = ConvStep(block.to(device), None if ident else gather.to(device),
                            send_idx.to(device), send_counts, lay.recv_counts[k],
                            bool(totals[k] > 0))
            if cached:  # the block's edges read straight from cat(held, received)
                col = block.edge_index[0] if step.gather is None else gather[block.edge_index[0]]
                step.whole = SourceGroups.build(
                    torch.zeros_like(col), col, block.edge_index[1],
                    [lay.rows[k].numel() + lay.recv[k].numel()], block.num_dst).to(device)
                step.src_ids = torch.cat([lay.rows[k], lay.recv[k]]).to(device)
                own = gather[: block.num_dst]
                if not torch.equal(own, torch.arange(own.numel())):  # else the first rows
                    step.dst_own = own.to(device)
            self.steps.append(step)
        if gatherer is not None:
            self.edge_bytes = gatherer.bytes
        self.shuffle_stats = ShuffleStats()
        self._weights = WeightCache()
        if overlap:
            for k, step in enumerate(self.steps):
                if step.exchange:
                    step.pipe = self._pipelined_step(k, step, gather_of[k])
        self._edges = sum(s.block.num_edges for s in self.steps)
        self._updates = sum(r.numel() for r in lay.rows[1:])

    def _pipelined_step(self, k: int, step: ConvStep, host: tuple[Block, torch.Tensor]
                        ) -> Pipelined:
        """Conv ``k``'s exchange as a :class:`PeerExchange` and its edges by source group."""
        lay, device = self.layout, self.device
        block, gather = host
        held = lay.rows[k].numel()
        counts = step.recv_counts
        off = torch.tensor([0] + counts).cumsum(0)
        row = gather[block.edge_index[0]]
        remote = row >= held
        peer = torch.searchsorted(off[1:], row - held, right=True)
        group = torch.where(remote, 1 + peer, torch.zeros_like(row))
        col = torch.where(remote, row - held - off[peer.clamp(max=len(counts) - 1)], row)
        groups = SourceGroups.build(group, col, block.edge_index[1], [held] + list(counts),
                                    block.num_dst)
        recv_ids = {p: lay.recv[k][off[p]:off[p + 1]].to(device)
                    for p in range(self.world) if counts[p]}
        dst_own = gather[: block.num_dst]
        ex = PeerExchange(step.send_idx.cpu(), step.send_counts, counts, self.group,
                          self.shuffle_stats, self.ring, tag=2 * k, hide=self.hide).to(device)
        return Pipelined(ex, groups.to(device), lay.rows[k].to(device), recv_ids,
                         dst_own.to(device), bool((dst_own < held).all()),
                         bool(torch.equal(dst_own, torch.arange(dst_own.numel()))),
                         (block, gather, held))

    def forward(self, model: GNN) -> torch.Tensor:
        """This rank's logits of its masters, layer by layer with the planned exchanges."""
        h = model.encode(self.x)
        split = model.splittable and not self.edge_features and sums_rows(model)
        for k, step in enumerate(self.steps):
            if step.pipe is not None:
                h = (self._by_source if split else self._by_destination)(model, k, step, h)
                continue
            src = h
            if step.exchange:
                recv = shuffle(h, step.send_idx, step.send_counts, step.recv_counts, self.group,
                               self.shuffle_stats, self.ring)
                src = torch.cat([h, recv])
            if step.whole is not None and split:
                h = self._whole(model, k, step, src)
            else:
                h = model.layer(k, src if step.gather is None else src[step.gather], step.block)
        return h

    def _whole(self, model: GNN, k: int, step: ConvStep, src: torch.Tensor) -> torch.Tensor:
        """Conv ``k`` of a splittable model as its aggregation over the block's edges (one
        CSR product, cached with its transpose) and its update, reading ``src`` =
        ``cat(held, received)`` rows without gathering them into the block's order."""
        mat = self._weights.get(model, k, step.block, step.whole, "whole", dtype=src.dtype)[0]
        reorder = model.reorders(k)  # transform first when it shrinks the rows (as the conv)
        x = model.inputs(src, step.src_ids) if k == 0 else src
        z = model.transform(k, x) if reorder else x
        agg = partial(model, k, mat, z)
        n = step.block.num_dst
        own = slice(0, n) if step.dst_own is None else step.dst_own
        dst_ids = step.block.src_ids[:n]
        out = model.update(k, agg, x[own], dst_ids, z[own] if reorder else None)
        return model.post(k, out, dst_ids)

    def _by_source(self, model: GNN, k: int, step: ConvStep, h: torch.Tensor) -> torch.Tensor:
        """Aggregate the held rows' edges while rows travel, each peer's as they arrive, then
        update (a splittable model)."""
        pipe = step.pipe
        started = pipe.exchange.start(h)
        mats = self._weights.get(model, k, step.block, pipe.groups, dtype=h.dtype)
        reorder = model.reorders(k)  # transform first when it shrinks the rows (as the conv)
        x = model.inputs(h, pipe.held_ids) if k == 0 else h
        z = model.transform(k, x) if reorder else x
        agg = partial(model, k, mats[0], z)
        got = {}
        for p, rows in pipe.exchange.arrivals(started):
            r = model.inputs(rows, pipe.recv_ids[p]) if k == 0 else rows
            got[p] = (r, model.transform(k, r) if reorder else r)
            agg = partial(model, k, mats[1 + p], got[p][1], into=agg)
        if pipe.dst_first:  # the destinations are the first held rows: no gather
            n = step.block.num_dst
            x_dst, z_dst = x[:n], z[:n]
        elif pipe.dst_held:
            x_dst, z_dst = x[pipe.dst_own], z[pipe.dst_own]
        else:
            x_dst, z_dst = (torch.cat([a] + [got[p][i] for p in sorted(got)])[pipe.dst_own]
                            for i, a in enumerate((x, z)))
        dst_ids = step.block.src_ids[: step.block.num_dst]
        out = model.update(k, agg, x_dst, dst_ids, z_dst if reorder else None)
        return pipe.exchange.join(model.post(k, out, dst_ids), started)

    def _by_destination(self, model: GNN, k: int, step: ConvStep, h: torch.Tensor
                        ) -> torch.Tensor:
        """Convolve the destinations that read only held rows while rows travel, then the
        rest (a model that cannot split its aggregation: GAT)."""
        pipe = step.pipe
        if pipe.by_destination is None:
            pipe.by_destination = split_by_destination(*pipe.host, self.device)
        b_local, g_local, b_rest, g_rest, order = pipe.by_destination
        started = pipe.exchange.start(h)
        out_local = model.layer(k, h[g_local], b_local)
        recv = pipe.exchange.gather(started, h)
        out_rest = model.layer(k, torch.cat([h, recv])[g_rest], b_rest)
        return pipe.exchange.join(torch.cat([out_local, out_rest])[order], started)

    def stats(self) -> dict[str, float]:
        """Edges computed, rows sent and replicated in the last pass."""
        s = self.shuffle_stats
        out = {"bytes_forward": float(s.bytes_forward), "bytes_backward": float(s.bytes_backward),
               "comm_seconds": s.seconds}
        s.reset()
        rep = self.layout.report
        nm = self.masters.numel()
        out.update({
            "edges_computed": float(self._edges), "vertex_updates": float(self._updates),
            "replicated_rows": float(sum(r.numel() - nm for r in self.layout.rows[1:])),
            "cached_feature_bytes": float(self._cached_bytes),
            "replicated_bytes": float(rep["replicated_bytes"]),
        })
        return out
