"""Which host each rank of a torchrun run is on, and naming a host that vanished.

Under torchrun every rank reports, once it has joined the process group, its node (torchrun's
``GROUP_RANK``), the address its listeners bind to (gloo's and NCCL's, the run's network) and
its host name (:func:`gather_peers`). When a collective fails because a peer went away, gloo's
error names the peer's address (``Connection closed by peer [10.0.0.2]:41235``, ``Connection
reset by peer``...); :func:`lost_host` maps that address back to the node and its ranks, so a
host that vanished mid-epoch (killed, rebooted, unplugged) is named on the hosts that remain:
``the host of ranks 2-3 (torchrun node 1, 10.0.0.2, host gpu7) is gone``. torchrun then ends
the run (its agent stops the other ranks of the host and exits non-zero).
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass

import torch.distributed as dist

from gnnscale.distributed.device import IFNAME_VARS, interface_address, source_address

#: A peer's address in gloo's (and the store's) connection errors: ``[10.0.0.2]:41235``.
PEER = re.compile(r"\[([0-9A-Fa-f.:]+)\]:(\d+)")
#: What a connection to a peer that is gone reads like.
GONE = re.compile(r"Connection (closed|reset) by peer|Broken pipe|Connection refused|"
                  r"No route to host|Network is unreachable|timed out|timeout",
                  re.IGNORECASE)


@dataclass(frozen=True)
class Peer:
    """Where one rank is: its torchrun node, listener address and host name."""

    rank: int
    node: int
    addr: str
    host: str


def own_address() -> str:
    """The address this rank's listeners bind to: that of the interface gloo is told
    (``GLOO_SOCKET_IFNAME``), else the one this host reaches ``MASTER_ADDR`` from."""
    name = os.environ.get(IFNAME_VARS[0])
    addr = interface_address(name) if name else None
    return addr or source_address(os.environ.get("MASTER_ADDR", "127.0.0.1"))


def gather_peers(rank: int) -> list[Peer]:
    """Every rank's :class:`Peer` (collective on the world group)."""
    mine = Peer(rank, int(os.environ.get("GROUP_RANK", 0)), own_address(),
                socket.gethostname())
    every: list = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine)
    return every


def _ranks(ranks: list[int]) -> str:
    ranks = sorted(ranks)
    if len(ranks) > 1 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def describe_node(peers: list[Peer], node: int) -> str:
    """``the host of ranks 2-3 (torchrun node 1, 10.0.0.2, host gpu7)``."""
    of = [p for p in peers if p.node == node]
    return (f"the host of {_ranks([p.rank for p in of])} (torchrun node {node}, "
            f"{of[0].addr}, host {of[0].host})")


def lost_host(error: BaseException, peers: list[Peer], rank: int) -> str | None:
    """A line naming the host(s) ``error`` says went away (a peer connection that closed, was
    reset or timed out, at a peer address that is another node's), None when it names none."""
    text = "".join(str(e) for e in _chain(error))
    if not GONE.search(text) or not peers:
        return None
    me = next(p for p in peers if p.rank == rank)
    addrs = {m.group(1) for m in PEER.finditer(text)}
    nodes = sorted({p.node for p in peers if p.addr in addrs and p.node != me.node})
    if not nodes:
        return None
    what = GONE.search(text).group(0)
    named = "; ".join(describe_node(peers, n) for n in nodes)
    return (f"{named} is gone (its connection to rank {rank}: {what}): it vanished or its "
            "ranks ended; see that host's own output for why")


def _chain(error: BaseException) -> list[BaseException]:
    out, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        out.append(error)
        error = error.__cause__ or error.__context__
    return out


class HostLost(RuntimeError):
    """A collective failed because another host of the run went away; the message names it."""
