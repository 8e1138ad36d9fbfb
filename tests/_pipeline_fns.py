"""Rank functions for the peer-exchange tests (module level, so spawn can import them)."""

from __future__ import annotations

import torch

from gnnscale.deps.pipeline import PeerExchange
from gnnscale.deps.shuffle import ShuffleStats, shuffle


def _pattern(rank: int, world: int, rows: int) -> tuple[torch.Tensor, list[int], list[int]]:
    """A random exchange every rank derives alike: rank q sends p ``counts[q][p]`` rows
    (some zero; none to itself)."""
    g = torch.Generator().manual_seed(3)
    counts = torch.randint(0, 4, (world, world), generator=g)
    counts[torch.arange(world), torch.arange(world)] = 0
    counts[0, world - 1] = 0  # a pair with nothing to say
    send_counts = counts[rank].tolist()
    recv_counts = counts[:, rank].tolist()
    gi = torch.Generator().manual_seed(10 + rank)
    send_idx = torch.randint(0, rows, (sum(send_counts),), generator=gi)
    return send_idx, send_counts, recv_counts


def compare(topo, ring: bool, hide: bool = True) -> dict:
    """The rows received and the gradients returned by the peer exchange and by the
    all-to-all shuffle on the same pattern; the bytes each counts."""
    rank, world, rows = topo.rank, topo.world_size, 7
    send_idx, send_counts, recv_counts = _pattern(rank, world, rows)
    base = torch.randn(rows, 5, generator=torch.Generator().manual_seed(rank))
    w = torch.randn(sum(recv_counts), 5, generator=torch.Generator().manual_seed(50 + rank))
    out = {}
    for name in ("shuffle", "pipeline"):
        x = base.clone().requires_grad_(True)
        stats = ShuffleStats()
        local = (x * 2.0).sum(0, keepdim=True)  # computed while rows travel
        if name == "shuffle":
            recv = shuffle(x, send_idx, send_counts, recv_counts, None, stats, ring)
            loss = (recv * w).sum() + local.sum()
        else:
            ex = PeerExchange(send_idx, send_counts, recv_counts, None, stats, ring, tag=4,
                              hide=hide)
            started = ex.start(x)
            got = dict(ex.arrivals(started))
            recv = torch.cat([got[p] for p in sorted(got)]) if got else x[:0]
            loss = PeerExchange.join((recv * w).sum() + local.sum(), started)
        loss.backward()
        out[name] = {"recv": recv.detach(), "grad": x.grad.clone(), "stats": stats}
    return out
