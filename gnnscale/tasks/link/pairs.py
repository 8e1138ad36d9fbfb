"""Scoring pairs whose endpoint rows sit on different ranks.

When output rows are spread over the ranks of a group (``split``: each rank its owned
targets; ``fullgraph``/``offload``: each its masters; layer-wise evaluation: each its share),
pair ``(u, v)`` is scored by the rank that holds ``u``'s row; the rows of ``v`` it lacks are
fetched from their holders with the autograd-aware shuffle (:mod:`gnnscale.deps.shuffle`),
once per distinct ``(scorer, v)``, so backward sends their gradients back and sums them into
the holders' rows. Every rank derives the same send and receive lists from the pair list and
the holders of the rows: no list travels.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from gnnscale.data.graph import unique_first
from gnnscale.deps.shuffle import ShuffleStats, shuffle
from gnnscale.distributed.collectives import all_gather_rows, gather_rows, group_rank, group_size


@dataclass
class RowLocator:
    """Which rank holds each vertex's row, and where in that rank's rows."""

    sorted_ids: torch.Tensor  # every held vertex, ascending
    holder: torch.Tensor      # ... its rank
    position: torch.Tensor    # ... its row on that rank
    world: int
    rank: int
    slot: torch.Tensor | None = None  # vertex -> its index in sorted_ids (-1: none), if dense

    @classmethod
    def build(cls, row_ids: torch.Tensor, group: dist.ProcessGroup | None = None
              ) -> RowLocator:
        """From each rank's ``row_ids`` (collective: one all-gather of ids)."""
        world, rank = group_size(group), group_rank(group)
        parts = all_gather_rows(row_ids.long().cpu(), group)
        ids = torch.cat(parts)
        holder = torch.repeat_interleave(torch.arange(world),
                                         torch.tensor([p.numel() for p in parts]))
        position = torch.cat([torch.arange(p.numel()) for p in parts])
        order = torch.argsort(ids)
        ids = ids[order]
        slot = None
        if ids.numel() and int(ids[0]) >= 0 and int(ids[-1]) < 2 * ids.numel() and \
                bool((ids[1:] > ids[:-1]).all()):
            # dense distinct ids (every vertex, or most, held once): a table replaces the search
            slot = torch.full((int(ids[-1]) + 1,), -1, dtype=torch.int64)
            slot[ids] = torch.arange(ids.numel())
        return cls(ids, holder[order], position[order], world, rank, slot)

    def find(self, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(holder, position)`` of vertices ``v`` (each must be held by some rank)."""
        if self.slot is not None and v.numel():
            at = self.slot[v.clamp(0, self.slot.numel() - 1)]
            bad = (at < 0) | (v < 0) | (v >= self.slot.numel())
            if bool(bad.any()):
                raise ValueError(f"pair endpoint {int(v[bad][0])} has no output row on any rank")
            return self.holder[at], self.position[at]
        at = torch.searchsorted(self.sorted_ids, v).clamp_max(max(self.sorted_ids.numel() - 1, 0))
        if v.numel() and (self.sorted_ids.numel() == 0 or
                          not bool((self.sorted_ids[at] == v).all())):
            missing = v[self.sorted_ids[at] != v] if self.sorted_ids.numel() else v
            raise ValueError(f"pair endpoint {int(missing[0])} has no output row on any rank")
        return self.holder[at], self.position[at]


def pair_rows(rows: torch.Tensor, locator: RowLocator, src: torch.Tensor, dst: torch.Tensor,
              num_nodes: int, group: dist.ProcessGroup | None = None,
              stats: ShuffleStats | None = None
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(z_src, z_dst, mine)``: the endpoint rows of the pairs this rank scores (those whose
    ``src`` row it holds; ``mine`` their positions in ``src``). Collective (one shuffle)
    when ``locator`` spans several ranks; differentiable in ``rows``."""
    table, a, b, mine = pair_index(rows, locator, src, dst, num_nodes, group, stats)
    return table[a], table[b], mine


def pair_index(rows: torch.Tensor, locator: RowLocator, src: torch.Tensor, dst: torch.Tensor,
               num_nodes: int, group: dist.ProcessGroup | None = None,
               stats: ShuffleStats | None = None
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`pair_rows` as ``(table, a, b, mine)``, the endpoint rows ``table[a]`` and
    ``table[b]`` left ungathered (a decoder scores them from the table: ``score_pairs``);
    ``table`` is ``rows`` and the rows received, ``a`` and ``b`` on ``rows``' device."""
    src, dst = src.long().cpu(), dst.long().cpu()
    h_src, p_src = locator.find(src)
    h_dst, p_dst = locator.find(dst)
    rank, world = locator.rank, locator.world
    mine = (h_src == rank).nonzero().reshape(-1)
    if world == 1:
        dev = rows.device
        return rows, p_src.to(dev), p_dst.to(dev), mine
    # distinct (scorer, holder, v) of remote endpoints, ordered by scorer, holder, then v
    remote = h_dst != h_src
    key = (h_src[remote] * world + h_dst[remote]) * num_nodes + dst[remote]
    key, first = unique_first(key)
    pos = p_dst[remote][first]
    scorer, holder = key // num_nodes // world, key // num_nodes % world
    out = holder == rank  # rows this rank sends, scorer by scorer
    send_counts = torch.bincount(scorer[out], minlength=world).tolist()
    inbound = scorer == rank  # rows it receives, holder by holder
    recv_counts = torch.bincount(holder[inbound], minlength=world).tolist()
    recv = shuffle(rows, pos[out], send_counts, recv_counts, group, stats)
    table = torch.cat([rows, recv])
    mine_remote = remote[mine]
    b = p_dst[mine].clone()
    wanted = (h_src[mine][mine_remote] * world + h_dst[mine][mine_remote]) * num_nodes \
        + dst[mine][mine_remote]
    got = key[inbound]
    b[mine_remote] = rows.shape[0] + torch.searchsorted(got, wanted)
    dev = rows.device
    return table, p_src[mine].to(dev), b.to(dev), mine


def gather_scores(scores: torch.Tensor, mine: torch.Tensor, total: int,
                  group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Every rank's ``scores`` of its pairs ``mine`` assembled into one ``[total]`` vector in
    pair order, on every rank of ``group`` (collective)."""
    part = torch.stack([scores.detach().double().cpu(), mine.double()], 1)
    rows = gather_rows(part, group)
    out = torch.full((total,), float("nan"), dtype=torch.float64)
    out[rows[:, 1].long()] = rows[:, 0]
    return out
