"""Which host each rank of a torchrun run is on, and naming a host that vanished.

Under torchrun every rank reports, once it has joined the process group, its node (torchrun's
``GROUP_RANK``), the address its listeners bind to (gloo's and NCCL's, the run's network) and
its host name (:func:`gather_peers`). When a collective fails because a peer went away, gloo's
error names the peer's address (``Connection closed by peer [10.0.0.2]:41235``, ``Connection
reset by peer``...); :func:`lost_host` maps that address back to the node and its ranks, so a
host that vanished mid-epoch (killed, rebooted, unplugged) is named on the hosts that remain:
``the host of ranks 2-3 (torchrun node 1, 10.0.0.2, host gpu7) is gone``. torchrun then ends
the run (its agent stops the other ranks of the host and exits non-zero).

A peer that is stopped (SIGSTOP, a debugger) or whose host's link went down closes nothing:
the collective only runs past its deadline, and gloo says "Timed out waiting 20000ms". So
every rank keeps a pulse in the run's store (:class:`Pulse`: a counter it advances every
:data:`PULSE_S` seconds from a thread of its own, over a store connection of its own); a
rank whose collective timed out marks itself so (it is a victim, alive) and watches the
others' pulses for :data:`WATCH_S` seconds (:func:`quiet_peers`): the ranks whose pulse stood
still and that did not time out themselves are the ones that did not answer, named with their
host (:func:`silent_host`). When the store itself does not answer, this host lost its link to
the store's host, which is named instead.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from dataclasses import dataclass
from datetime import timedelta

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


#: seconds between two beats of a rank's pulse in the run's store
PULSE_S = 0.5
#: seconds a rank whose collective timed out watches the others' pulses
WATCH_S = 3.0
#: deadline of one store operation of the pulse (connecting included)
STORE_S = 5.0
#: A collective (or store wait) that ran past its deadline, in an error's text.
TIMED_OUT = re.compile(r"timed out|timeout(?!_s)|timing out", re.IGNORECASE)


def _store(timeout_s: float = STORE_S) -> dist.TCPStore:
    """A connection of its own to the run's store (torchrun's ``MASTER_ADDR:MASTER_PORT``)."""
    return dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), None,
                         False, timedelta(seconds=timeout_s))


class Pulse:
    """This rank's pulse in the run's store: the counter ``<prefix>/pulse/<rank>``, advanced
    every :data:`PULSE_S` seconds by a daemon thread over a store connection of its own (a
    stopped process, or one whose host lost its link, stops advancing it)."""

    def __init__(self, rank: int, prefix: str) -> None:
        self.rank, self.prefix = rank, prefix
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Pulse:
        """Start beating (returns itself)."""
        self._thread = threading.Thread(target=self._beat, name="gnnscale-pulse", daemon=True)
        self._thread.start()
        return self

    def _beat(self) -> None:
        try:
            store = _store()
            key = f"{self.prefix}/pulse/{self.rank}"
            while not self._stop.is_set():
                store.add(key, 1)
                self._stop.wait(PULSE_S)
        except Exception:  # noqa: BLE001 - the store is gone: the pulse stops, as it should
            return

    def timed_out(self) -> None:
        """Mark this rank as one whose own collective timed out (alive: not the one that
        went quiet); best effort."""
        try:
            _store().set(f"{self.prefix}/timed_out/{self.rank}", "1")
        except Exception:  # noqa: BLE001 - the store is gone: quiet_peers says so
            pass

    def stop(self) -> None:
        """Stop beating."""
        self._stop.set()


def quiet_peers(prefix: str, world_size: int, rank: int, watch_s: float = WATCH_S
                ) -> list[int] | None:
    """The ranks other than ``rank`` whose pulse stood still for ``watch_s`` seconds and that
    did not time out themselves; None when the run's store does not answer."""
    try:
        store = _store()
        keys = [f"{prefix}/pulse/{r}" for r in range(world_size)]
        before = [store.add(k, 0) for k in keys]
        time.sleep(watch_s)
        after = [store.add(k, 0) for k in keys]
        victims = {r for r in range(world_size)
                   if store.check([f"{prefix}/timed_out/{r}"])}
    except Exception:  # noqa: BLE001 - the store does not answer
        return None
    return [r for r in range(world_size)
            if r != rank and after[r] == before[r] and r not in victims]


def timed_out(error: BaseException) -> bool:
    """Whether ``error`` (or what caused it) is a collective that ran past its deadline."""
    return any(TIMED_OUT.search(str(e)) for e in _chain(error))


def _named(peers: list[Peer], ranks: list[int]) -> str:
    """``rank 2 (torchrun node 1, 10.0.0.2, host gpu7)``, grouped by host."""
    out = []
    for node in sorted({p.node for p in peers if p.rank in ranks}):
        of = [p for p in peers if p.node == node and p.rank in ranks]
        out.append(f"{_ranks([p.rank for p in of])} (torchrun node {node}, {of[0].addr}, "
                   f"host {of[0].host})")
    return "; ".join(out)


def closed_on_this_host(error: BaseException, peers: list[Peer], rank: int) -> bool:
    """Whether ``error`` is a peer connection closed by a rank of ``rank``'s own node (one
    whose collective ran past its deadline a moment sooner and gave up), not by another host."""
    text = "".join(str(e) for e in _chain(error))
    if not peers or not re.search(r"Connection (closed|reset) by peer", text):
        return False
    me = next(p for p in peers if p.rank == rank)
    addrs = {m.group(1) for m in PEER.finditer(text)}
    return bool(addrs) and all(any(p.addr == a and p.node == me.node for p in peers)
                               for a in addrs)


def silent_host(peers: list[Peer], rank: int, prefix: str, timeout_s: float,
                pulse: Pulse | None = None) -> str | None:
    """After ``rank``'s collective timed out: a line naming the rank(s) and host(s) that did
    not answer (their pulse stood still), or the store's host when this host cannot reach the
    store either; None when every other rank still beats (one runs but skipped the
    collective)."""
    if pulse is not None:
        pulse.timed_out()
    quiet = quiet_peers(prefix, len(peers), rank)
    deadline = f"dist.timeout_s={timeout_s:g}s"
    if quiet is None:
        addr = os.environ.get("MASTER_ADDR", "?")
        try:
            resolved = socket.gethostbyname(addr)
        except OSError:
            resolved = addr
        nodes = sorted({p.node for p in peers if p.addr in (addr, resolved)})
        where = "; ".join(describe_node(peers, n) for n in nodes) or f"MASTER_ADDR={addr}"
        return (f"rank {rank}'s collective timed out ({deadline}) and the run's store at "
                f"{addr}:{os.environ.get('MASTER_PORT', '?')} does not answer either: this "
                f"host lost its link to {where}, or that host stopped")
    if not quiet:
        return None
    many = len(quiet) > 1
    return (f"{_named(peers, quiet)} did not answer: rank {rank}'s collective timed out "
            f"waiting ({deadline}) and {'their pulses' if many else 'its pulse'} in the run's "
            f"store stopped (a stopped process, or a host whose link went down); see that "
            "host's own output")
