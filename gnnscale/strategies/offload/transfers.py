"""Deduplicated transfers (HongTu section 5): who loads which host rows for a batch, who sends
what to whom, and how a rank assembles its chunk's source rows.

Every rank keeps its masters' rows in host memory. For batch ``b`` rank ``p`` needs the rows
``load[p]`` of its chunk (destinations first). Each owner ``q`` fills a device buffer from its
host rows, sends peers the rows they need over the Shuffle, and keeps its own:

- ``none``: the baseline; the owner loads each requester's rows separately (a row needed by
  three chunks crosses the host link three times), ``sum_p |load[p]|`` rows per batch;
- ``inter``: the owner loads the batch's transition set (the union of the batch's load sets,
  its own rows ``T_b^q``) once and shares it: ``|T_b|`` rows per batch;
- ``inter+intra``: rows of ``T_b^q`` already in the previous batch's buffer stay on the device
  (reused in place); only ``T_b^q \\ T_{b-1}^q`` is loaded. In the backward pass the gradients
  of rows the next batch holds again stay on the device too.

With ``edge_ids`` a batch also carries its chunk's edges' global ids (``e_id``: their CSC
positions, in the order of ``edge_index``), from which a typed graph's chunks take their edge
types and a model that reads edge features its ``edge_attr``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.strategies.offload.chunks import Chunking
from gnnscale.strategies.offload.config import DEDUP


@dataclass
class BatchTransfer:
    """One rank's part of one batch (all indices are tensors of int64)."""

    dst: torch.Tensor             # host-local positions of the chunk's destinations
    src_ids: torch.Tensor         # global ids of the chunk's sources (destinations first)
    edge_index: torch.Tensor      # (local source, local destination)
    buffer: torch.Tensor          # host-local positions of the device buffer's rows
    reuse_dst: torch.Tensor       # buffer positions filled from the previous buffer ...
    reuse_src: torch.Tensor       # ... from these positions of it (inter+intra)
    load: torch.Tensor            # buffer positions loaded from the host
    keep: torch.Tensor            # buffer rows the next batch holds again (gradient carry)
    send_idx: torch.Tensor        # buffer positions sent to peers, peer by peer
    send_counts: list[int]
    recv_counts: list[int]
    assemble: torch.Tensor        # source row -> row of cat(buffer, received)
    e_id: torch.Tensor | None = None  # the edges' CSC positions (their ids), with edge_ids

    @property
    def rows_loaded(self) -> int:
        """Rows this batch loads from the host."""
        return int(self.load.numel())

    @property
    def rows_reused(self) -> int:
        """Rows this batch takes from the previous batch instead of the host."""
        return int(self.reuse_dst.numel())


def _positions(sorted_ids: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return torch.searchsorted(sorted_ids, ids)


def in_edge_ids(graph: GraphStore, dst: torch.Tensor) -> torch.Tensor:
    """The CSC positions (edge ids) of the in-edges of ``dst``, in the order
    :func:`~gnnscale.deps.planner.in_edges` lists them (destination by destination, each one's
    edges in CSC order)."""
    start = graph.indptr[dst]
    counts = graph.indptr[dst + 1] - start
    first = torch.repeat_interleave(start - (counts.cumsum(0) - counts), counts)
    return first + torch.arange(first.numel())


def plan_transfers(chunking: Chunking, part: torch.Tensor, masters: list[torch.Tensor],
                   rank: int, dedup: str, graph: GraphStore, edge_ids: bool = False
                   ) -> list[BatchTransfer]:
    """This rank's transfers for every batch of a pass, in run order (``edge_ids``: with each
    chunk's edge ids)."""
    if dedup not in DEDUP:
        raise ValueError(f"strategy.dedup must be one of {DEDUP}, got {dedup!r}")
    from gnnscale.deps.planner import in_edges

    world = len(masters)
    out: list[BatchTransfer] = []
    prev: torch.Tensor | None = None
    for step in range(chunking.num_chunks):
        loads = [chunking.load[p][chunking.batch(p, step)] for p in range(world)]
        owners = [part[ids] for ids in loads]
        # owner side: the buffer's global ids and where each requester's rows sit in it
        if dedup == "none":
            pieces = [loads[p][owners[p] == rank] for p in range(world)]
            buf_ids = torch.cat(pieces)
            offs = torch.tensor([0] + [x.numel() for x in pieces]).cumsum(0)
            where = [torch.arange(offs[p], offs[p + 1]) for p in range(world)]
        else:
            pieces = [loads[p][owners[p] == rank] for p in range(world)]
            buf_ids = torch.unique(torch.cat(pieces))
            where = [_positions(buf_ids, x) for x in pieces]
        send_idx = torch.cat([where[p] for p in range(world) if p != rank]) if world > 1 \
            else torch.zeros(0, dtype=torch.int64)
        send_counts = [0 if p == rank else where[p].numel() for p in range(world)]
        # requester side: rows from each owner arrive in owner order, as the owner sent them
        mine, own = loads[rank], owners[rank]
        recv_counts = [0 if q == rank else int((own == q).sum()) for q in range(world)]
        assemble = torch.empty(mine.numel(), dtype=torch.int64)
        local = own == rank
        assemble[local] = where[rank]
        base = buf_ids.numel()
        for q in range(world):
            if q == rank:
                continue
            sel = (own == q).nonzero().flatten()
            assemble[sel] = base + torch.arange(sel.numel())
            base += sel.numel()
        # intra: reuse the previous buffer's rows
        host = _positions(masters[rank], buf_ids)
        if dedup == "inter+intra" and prev is not None and prev.numel() and buf_ids.numel():
            pos = _positions(prev, buf_ids).clamp(max=prev.numel() - 1)
            hit = prev[pos] == buf_ids
            reuse_dst, reuse_src = hit.nonzero().flatten(), pos[hit]
            load = (~hit).nonzero().flatten()
        else:
            reuse_dst = reuse_src = torch.zeros(0, dtype=torch.int64)
            load = torch.arange(buf_ids.numel())
        dst_global = chunking.dst[rank][chunking.batch(rank, step)]
        src, dpos = in_edges(graph, dst_global)
        spos = _positions_unsorted(mine, src, graph.num_nodes)
        out.append(BatchTransfer(
            dst=_positions(masters[rank], dst_global), src_ids=mine,
            edge_index=torch.stack([spos, dpos]), buffer=host, reuse_dst=reuse_dst,
            reuse_src=reuse_src, load=load, keep=torch.zeros(0, dtype=torch.int64),
            send_idx=send_idx, send_counts=send_counts, recv_counts=recv_counts,
            assemble=assemble, e_id=in_edge_ids(graph, dst_global) if edge_ids else None))
        prev = buf_ids if dedup == "inter+intra" else None
    if dedup == "inter+intra":
        for a, b in zip(out[:-1], out[1:]):
            a.keep = b.reuse_src  # rows of a's buffer that b holds again
    return out


def _positions_unsorted(order: torch.Tensor, ids: torch.Tensor, n: int) -> torch.Tensor:
    """Position of each of ``ids`` in ``order`` (a permutation of a subset of 0..n-1)."""
    pos = torch.full((n,), -1, dtype=torch.int64)
    pos[order] = torch.arange(order.numel())
    out = pos[ids]
    if bool((out < 0).any()):
        raise RuntimeError("a chunk's edge reads a row outside its load set (planner bug)")
    return out
