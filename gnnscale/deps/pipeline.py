"""A shuffle consumed peer by peer, so communication overlaps computation in both passes
(NeutronStar section 4.3: source-specific chunks sent ring-ordered, each processed as it
arrives; gradients computed first, then sent).

The exchange is described as :func:`~gnnscale.deps.shuffle.shuffle`'s: ``send_idx`` +
``send_counts`` + ``recv_counts``. Use::

    ex = PeerExchange(send_idx, send_counts, recv_counts, group, stats, ring, tag)
    token = ex.start(x)                   # one non-blocking send and receive per peer
    ...compute what reads only local rows...
    for peer, rows in ex.arrivals(token):  # each peer's rows as they arrive
        ...compute on them...
    out = ex.join(out, token)             # ties the exchange to the result (autograd)

``arrivals`` yields the peer whose rows have arrived first (gloo's ``is_completed``), waiting
only when none has, on the next in ring order. In the backward pass, a peer's rows send their
gradient back to that peer as soon as autograd has computed it (non-blocking), and ``start``'s
backward, which autograd runs after every computation created after it (nodes run in reverse
order of creation: the local computation's included), waits for the gradients of the rows this
rank sent and sums them into ``x``'s (``index_add``): the last moment they are needed.

Messages are point-to-point gloo (or nccl) sends tagged per exchange (``tag`` forward,
``tag + 1`` backward), so exchanges of different layers never match each other's messages.
:class:`~gnnscale.deps.shuffle.ShuffleStats` counts the bytes sent and the *exposed* seconds:
posting, and waiting on a message that has not arrived (time hidden behind computation is not
counted).
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup

from gnnscale.deps.shuffle import ShuffleStats, _check, posted


def _offsets(counts: list[int]) -> list[int]:
    out = [0]
    for c in counts:
        out.append(out[-1] + c)
    return out


def _done(work: dist.Work | None) -> bool:
    """Whether a receive has arrived (None: already waited on)."""
    return work is None or work.is_completed()


class _Flight:
    """The messages of one exchange (one forward, its backward)."""

    def __init__(self, ex: PeerExchange) -> None:
        self.ex = ex
        self.rows = 0
        self.send_buf: torch.Tensor | None = None
        self.sends: list[dist.Work] = []
        self.recv: dict[int, torch.Tensor] = {}
        self.recv_work: dict[int, dist.Work | None] = {}  # None: already waited on
        self.grad_recv: dict[int, torch.Tensor] = {}
        self.grad_work: dict[int, dist.Work] = {}
        self.grad_sends: list[dist.Work] = []

    def post_grad_recvs(self, like: torch.Tensor) -> None:
        """Post the receives of the gradients of the rows this rank sent (once)."""
        if self.grad_recv or not self.ex.sum_send:
            return
        ex = self.ex
        width = tuple(like.shape[1:])
        for q in ex.send_order:
            buf = like.new_empty((ex.send_counts[q],) + width)
            self.grad_recv[q] = buf
            self.grad_work[q] = posted(dist.irecv(buf, ex.peer(q), group=ex.group,
                                                  tag=ex.tag + 1))


class _Start(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, flight: _Flight):
        ex = flight.ex
        t0 = time.perf_counter()
        flight.rows = x.shape[0]
        width = tuple(x.shape[1:])
        flight.send_buf = x.detach().index_select(0, ex.send_idx).contiguous()
        for p in ex.recv_order:
            buf = x.new_empty((ex.recv_counts[p],) + width)
            flight.recv[p] = buf
            flight.recv_work[p] = posted(dist.irecv(buf, ex.peer(p), group=ex.group,
                                                    tag=ex.tag))
        for q in ex.send_order:
            rows = flight.send_buf[ex.send_off[q]:ex.send_off[q + 1]]
            flight.sends.append(posted(dist.isend(rows, ex.peer(q), group=ex.group,
                                                  tag=ex.tag)))
        if not ex.hide:  # a gloo work is waited on once: mark them done
            for w in [*(r for r in flight.recv_work.values() if r is not None), *flight.sends]:
                w.wait()
            flight.recv_work = dict.fromkeys(flight.recv_work)
            flight.sends = []
        ex.count(time.perf_counter() - t0, flight.send_buf.numel() * x.element_size(), False)
        ctx.flight = flight
        return x.new_empty(0)

    @staticmethod
    def backward(ctx, _grad):
        flight = ctx.flight
        ex = flight.ex
        t0 = time.perf_counter()
        like = flight.send_buf
        flight.post_grad_recvs(like)
        gx = like.new_zeros((flight.rows,) + tuple(like.shape[1:]))
        if ex.sum_send:
            for q in ex.send_order:
                flight.grad_work[q].wait()
            # send_idx is grouped by peer in rank order
            back = torch.cat([flight.grad_recv[q] for q in sorted(ex.send_order)])
            gx.index_add_(0, ex.send_idx, back)
        for w in flight.grad_sends:
            w.wait()
        ex.count(time.perf_counter() - t0, 0, True)
        flight.grad_recv, flight.grad_sends, flight.send_buf = {}, [], None
        return gx, None


class _Arrive(torch.autograd.Function):
    @staticmethod
    def forward(ctx, token: torch.Tensor, flight: _Flight, peer: int):
        t0 = time.perf_counter()
        work = flight.recv_work.pop(peer)
        if work is not None:
            work.wait()
        flight.ex.count(time.perf_counter() - t0, 0, False)
        ctx.flight, ctx.peer = flight, peer
        return flight.recv.pop(peer)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        flight, peer = ctx.flight, ctx.peer
        ex = flight.ex
        t0 = time.perf_counter()
        flight.post_grad_recvs(grad)
        grad = grad.contiguous()
        flight.grad_sends.append(posted(dist.isend(grad, ex.peer(peer), group=ex.group,
                                                   tag=ex.tag + 1)))
        if not ex.hide:
            flight.grad_sends.pop().wait()
        ex.count(time.perf_counter() - t0, grad.numel() * grad.element_size(), True)
        return grad.new_zeros(0), None, None


class _Join(torch.autograd.Function):
    @staticmethod
    def forward(ctx, out: torch.Tensor, token: torch.Tensor):
        return out.view_as(out)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, grad.new_zeros(0)


class PeerExchange:
    """One shuffle's pattern (see the module docstring); reusable epoch after epoch.

    ``send_idx``: rows of ``x`` to send, ``send_counts[q]`` consecutive ones to rank ``q``;
    ``recv_counts[p]`` rows arrive from rank ``p``. A rank sends itself nothing. ``ring``
    posts the sends and waits on the receives in NeutronStar's ring order (step ``j``: to
    ``rank + j``, from ``rank - j``); ``tag`` (and ``tag + 1``) must be this exchange's own.
    ``hide=False`` waits for every message as soon as it is posted: the same computation
    with nothing hidden behind it (to measure what overlapping hides).
    """

    def __init__(self, send_idx: torch.Tensor, send_counts: list[int], recv_counts: list[int],
                 group: ProcessGroup | None = None, stats: ShuffleStats | None = None,
                 ring: bool = False, tag: int = 0, hide: bool = True) -> None:
        _check(send_idx, send_counts, recv_counts)
        world = len(send_counts)
        self.rank = dist.get_rank(group) if world > 1 else 0
        if send_counts[self.rank] or recv_counts[self.rank]:
            raise ValueError("PeerExchange: a rank sends itself no rows (keep them local)")
        self.group, self.stats, self.tag, self.hide = group, stats, tag, hide
        self.send_counts, self.recv_counts = list(send_counts), list(recv_counts)
        self.send_off = _offsets(self.send_counts)
        steps = [(self.rank + j) % world for j in range(1, world)] if ring \
            else [q for q in range(world) if q != self.rank]
        back = [(self.rank - j) % world for j in range(1, world)] if ring \
            else [q for q in range(world) if q != self.rank]
        self.send_order = [q for q in steps if send_counts[q]]
        self.recv_order = [p for p in back if recv_counts[p]]
        self.send_idx = send_idx
        self.sum_send = sum(send_counts)

    def peer(self, q: int) -> int:
        """The global rank of group rank ``q``."""
        return q if self.group is None else dist.get_global_rank(self.group, q)

    def count(self, seconds: float, nbytes: int, backward: bool) -> None:
        """Exposed seconds and bytes sent, into the stats."""
        if self.stats is not None:
            self.stats.add(seconds, nbytes, backward)

    def to(self, device: torch.device | str) -> PeerExchange:
        """The exchange with its row indices on ``device``."""
        self.send_idx = self.send_idx.to(device)
        return self

    def start(self, x: torch.Tensor) -> tuple[torch.Tensor, _Flight]:
        """Post every send of ``x[send_idx]`` and every receive; returns at once."""
        flight = _Flight(self)
        return _Start.apply(x, flight), flight

    def arrivals(self, started: tuple[torch.Tensor, _Flight]):
        """``(peer, rows)`` for every peer that sends this rank rows, in arrival order."""
        token, flight = started
        pending = list(self.recv_order)
        while pending:
            peer = next((p for p in pending if _done(flight.recv_work[p])), pending[0])
            pending.remove(peer)
            yield peer, _Arrive.apply(token, flight, peer)
        t0 = time.perf_counter()
        for w in flight.sends:  # the peers have received them: done, or nearly
            w.wait()
        flight.sends = []
        self.count(time.perf_counter() - t0, 0, False)

    def gather(self, started: tuple[torch.Tensor, _Flight], like: torch.Tensor) -> torch.Tensor:
        """Every peer's rows, in rank order (as :func:`shuffle` returns them)."""
        got = dict(self.arrivals(started))
        width = tuple(like.shape[1:])
        parts = [got[p] for p in sorted(got)]
        return torch.cat(parts) if parts else like.new_empty((0,) + width)

    @staticmethod
    def join(out: torch.Tensor, started: tuple[torch.Tensor, _Flight]) -> torch.Tensor:
        """``out`` itself, made to depend on the exchange, so its backward always runs."""
        return _Join.apply(out, started[0])
