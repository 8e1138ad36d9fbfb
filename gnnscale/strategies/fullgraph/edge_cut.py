"""Full-graph forward on an edge-cut: DepCache, DepComm and the hybrid (NeutronStar).

The dependency planner (:mod:`gnnscale.deps.planner`) says which rows this rank holds at each
layer and which it receives. Here that becomes, per conv, a local block (destinations = the
rows held at the next layer, masters first; sources = destinations, then the other rows read),
a gather from ``cat(held rows, received rows)`` into the block's source order, and the
shuffle's send lists (exchanged with the owners once, at set-up).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.deps.base import DependencyManager
from gnnscale.deps.planner import EdgeCutLayout, in_edges, plan_edge_cut
from gnnscale.deps.shuffle import ShuffleStats, shuffle, start_shuffle
from gnnscale.distributed.collectives import all_reduce_host, all_to_all_host
from gnnscale.models.base import GNN
from gnnscale.sampling.base import Block
from gnnscale.strategies.fullgraph.plan import FullGraphPlan


@dataclass
class ConvStep:
    """Conv ``k``: shuffle layer-``k`` rows, gather the block's sources, run the conv."""

    block: Block
    gather: torch.Tensor | None       # source row -> row of cat(held, received); None = same
    send_idx: torch.Tensor
    send_counts: list[int]
    recv_counts: list[int]
    exchange: bool                    # any rank receives rows at this layer
    # overlap: destinations whose sources are all held, run while the rows are in flight
    local: tuple[Block, torch.Tensor, torch.Tensor, Block, torch.Tensor] | None = None


def exchange_requests(recv: torch.Tensor, recv_counts: list[int], group
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


def _conv_block(graph: GraphStore, dst: torch.Tensor, held: torch.Tensor, recv: torch.Tensor
                ) -> tuple[Block, torch.Tensor]:
    """Block of conv on ``dst`` (sources: ``dst`` first) and its gather from ``[held, recv]``."""
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
    return block, gather


class EdgeCutPlan(FullGraphPlan):
    """One rank's full-graph forward on an edge-cut partition, dependencies per ``deps``.

    Collective at construction (send lists, global traffic flags; Hybrid's cost probe).
    ``ring``: peer-ordered exchange; ``overlap``: convolve the destinations whose sources are
    all held while the received rows are in flight.
    """

    def __init__(self, graph: GraphStore, part: torch.Tensor, rank: int, world: int,
                 deps: DependencyManager, dims: list[int], group=None, ring: bool = False,
                 overlap: bool = False, device: torch.device | str = "cpu",
                 budget: int | None = None) -> None:
        self.group, self.ring, self.overlap, self.world = group, ring, overlap, world
        lc = None
        if not (deps.replicates_all or deps.replicates_none) and world > 1:
            deps.prepare(group=group)
            lc = deps.layer_costs(dims)
        self.layout: EdgeCutLayout = plan_edge_cut(graph, part, rank, world, deps, dims, lc,
                                                   budget)
        lay = self.layout
        self.masters = lay.masters
        self.dims, self.device = dims, device
        self.x = graph.x[lay.rows[0]].to(device)
        totals = torch.tensor([r.numel() for r in lay.recv], dtype=torch.int64)
        if world > 1:
            all_reduce_host(totals, group=group)
        self.steps: list[ConvStep] = []
        for k in range(len(dims) - 1):
            block, gather = _conv_block(graph, lay.rows[k + 1], lay.rows[k], lay.recv[k])
            send_idx, send_counts = torch.zeros(0, dtype=torch.int64), [0] * world
            if totals[k] > 0:
                wanted, send_counts = exchange_requests(lay.recv[k], lay.recv_counts[k], group)
                send_idx = torch.searchsorted(self.masters, wanted)
            ident = gather.numel() == lay.rows[k].numel() + lay.recv[k].numel() and \
                bool((gather == torch.arange(gather.numel())).all())
            step = ConvStep(block.to(device), None if ident else gather.to(device),
                            send_idx.to(device), send_counts, lay.recv_counts[k],
                            bool(totals[k] > 0))
            if overlap and step.exchange:
                step.local = _split_local(block, gather, lay.rows[k].numel(), device)
            self.steps.append(step)
        self.shuffle_stats = ShuffleStats()
        self._edges = sum(s.block.num_edges for s in self.steps)
        self._updates = sum(r.numel() for r in lay.rows[1:])

    def forward(self, model: GNN) -> torch.Tensor:
        """This rank's logits of its masters, layer by layer with the planned exchanges."""
        h = self.x
        for k, step in enumerate(self.steps):
            if not step.exchange:
                src = h
                h = model.layer(k, src if step.gather is None else src[step.gather], step.block)
                continue
            if step.local is not None:
                h = self._overlapped(model, k, step, h)
                continue
            recv = shuffle(h, step.send_idx, step.send_counts, step.recv_counts, self.group,
                           self.shuffle_stats, self.ring)
            src = torch.cat([h, recv])
            h = model.layer(k, src if step.gather is None else src[step.gather], step.block)
        return h

    def _overlapped(self, model: GNN, k: int, step: ConvStep, h: torch.Tensor) -> torch.Tensor:
        """Start the exchange, convolve the all-local destinations, then the rest."""
        b_local, g_local, b_rest, g_rest, order = step.local
        pending = start_shuffle(h, step.send_idx, step.send_counts, step.recv_counts,
                                self.group, self.shuffle_stats, self.ring)
        out_local = model.layer(k, h[g_local], b_local)
        recv = shuffle(h, step.send_idx, step.send_counts, step.recv_counts, self.group,
                       self.shuffle_stats, self.ring, pending=pending)
        out_rest = model.layer(k, torch.cat([h, recv])[g_rest], b_rest)
        return torch.cat([out_local, out_rest])[order]

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
            "cached_feature_bytes": float((self.layout.rows[0].numel() - nm) * 4 * self.dims[0]),
            "replicated_bytes": float(rep["replicated_bytes"]),
        })
        return out


def _sub_block(block: Block, gather: torch.Tensor, dsts: torch.Tensor
               ) -> tuple[Block, torch.Tensor]:
    """The part of ``block`` whose destinations are ``dsts`` (local ids), sources renumbered
    with those destinations first; its gather from the same rows as ``gather``."""
    ei = block.edge_index
    keep = torch.zeros(block.num_dst, dtype=torch.bool)
    keep[dsts] = True
    e = ei[:, keep[ei[1]]]
    used = torch.zeros(block.num_src, dtype=torch.bool)
    used[e[0]] = True
    used[dsts] = False
    src = torch.cat([dsts, used.nonzero().flatten()])
    spos = torch.full((block.num_src,), -1, dtype=torch.int64)
    spos[src] = torch.arange(src.numel())
    dpos = torch.full((block.num_dst,), -1, dtype=torch.int64)
    dpos[dsts] = torch.arange(dsts.numel())
    ids = None if block.src_ids is None else block.src_ids[src]
    sub = Block(torch.stack([spos[e[0]], dpos[e[1]]]), (src.numel(), dsts.numel()), ids)
    return sub, gather[src]


def _split_local(block: Block, gather: torch.Tensor, num_held: int, device
                 ) -> tuple[Block, torch.Tensor, Block, torch.Tensor, torch.Tensor]:
    """Destinations reading only held rows vs the rest, and the order that restores them."""
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
