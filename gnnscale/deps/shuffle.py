"""The dependency shuffle: an autograd Function that sends rows to the ranks that need them.

Forward: rank ``r`` sends peer ``q`` the rows ``x[send_idx[q-th slice]]`` (one coalesced
message per peer) and receives ``sum(recv_counts)`` rows, peer by peer. Backward: the received
rows' gradients travel back the same way and are summed into the sender's rows
(``index_add``), so a row read by several ranks gets the sum of their gradients. Generic: the
split strategy and full-graph training both describe a shuffle by ``send_idx`` +
``send_counts`` + ``recv_counts``.

Two ways to move the messages: one ``all_to_all_single`` (default), or ``ring=True``:
NeutronStar's peer-ordered exchange, where in step ``j`` rank ``r`` sends to ``r + j`` and
receives from ``r - j`` (mod world), so no two ranks send to one peer at once.
:func:`start_shuffle` launches a forward exchange asynchronously, so a caller can compute what
does not depend on it while the rows are in flight (``overlap``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup


@dataclass
class ShuffleStats:
    """Seconds spent in shuffles and bytes sent by this rank (forward and backward)."""

    seconds: float = 0.0
    bytes_sent: int = 0
    bytes_forward: int = 0
    bytes_backward: int = 0

    def reset(self) -> None:
        """Zero every figure."""
        self.seconds, self.bytes_sent, self.bytes_forward, self.bytes_backward = 0.0, 0, 0, 0

    def add(self, seconds: float, nbytes: int, backward: bool) -> None:
        """Count one exchange: ``seconds`` and ``nbytes`` sent, forward or backward."""
        self.seconds += seconds
        self.bytes_sent += nbytes
        if backward:
            self.bytes_backward += nbytes
        else:
            self.bytes_forward += nbytes


class _Pending:
    """An exchange in flight: ``wait()`` returns the received rows."""

    def __init__(self, recv: torch.Tensor, works: list, nbytes: int, t0: float,
                 stats: ShuffleStats | None, backward: bool) -> None:
        self.recv, self.works, self.nbytes, self.t0 = recv, works, nbytes, t0
        self.stats, self.backward = stats, backward

    def wait(self) -> torch.Tensor:
        for w in self.works:
            w.wait()
        if self.stats is not None:
            self.stats.add(time.perf_counter() - self.t0, self.nbytes, self.backward)
        return self.recv


def posted(work: dist.Work | None) -> dist.Work:
    """The work of a message just posted (None only for a rank outside the message's group,
    which never posts one: a RuntimeError)."""
    if work is None:
        raise RuntimeError("a rank outside the process group posted a message")
    return work


def _ring(send: torch.Tensor, recv: torch.Tensor, send_counts: list[int],
          recv_counts: list[int], group) -> None:
    """Peer-ordered point-to-point exchange, step by step (returns when done)."""
    world, rank = len(send_counts), dist.get_rank(group)
    s_off = [0] * (world + 1)
    r_off = [0] * (world + 1)
    for q in range(world):
        s_off[q + 1] = s_off[q] + send_counts[q]
        r_off[q + 1] = r_off[q] + recv_counts[q]
    recv[r_off[rank]:r_off[rank + 1]] = send[s_off[rank]:s_off[rank + 1]]
    for j in range(1, world):
        to, frm = (rank + j) % world, (rank - j) % world
        peer_to = to if group is None else dist.get_global_rank(group, to)
        peer_from = frm if group is None else dist.get_global_rank(group, frm)
        step = []
        if send_counts[to]:
            step.append(posted(dist.isend(send[s_off[to]:s_off[to + 1]], peer_to, group=group)))
        if recv_counts[frm]:
            step.append(posted(dist.irecv(recv[r_off[frm]:r_off[frm + 1]], peer_from,
                                          group=group)))
        for w in step:  # one step at a time: the ring's time slots
            w.wait()


def _start(send: torch.Tensor, send_counts: list[int], recv_counts: list[int], group,
           stats: ShuffleStats | None, backward: bool, ring: bool,
           async_op: bool = False) -> _Pending:
    send = send.contiguous()
    recv = send.new_empty((sum(recv_counts),) + tuple(send.shape[1:]))
    t0 = time.perf_counter()
    if ring:
        _ring(send, recv, send_counts, recv_counts, group)
        works = []
    else:
        work = dist.all_to_all_single(recv, send, recv_counts, send_counts, group=group,
                                      async_op=async_op)
        works = [work] if async_op else []
    return _Pending(recv, works, send.numel() * send.element_size(), t0, stats, backward)


class Shuffle(torch.autograd.Function):
    """``recv = shuffle(x, send_idx, send_counts, recv_counts)``; see the module docstring."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, send_idx: torch.Tensor,  # type: ignore[override]
                send_counts: list[int], recv_counts: list[int],
                group: ProcessGroup | None = None, stats: ShuffleStats | None = None,
                ring: bool = False, pending: _Pending | None = None):
        """Send ``x[send_idx]`` to the peers slice by slice (or wait on ``pending``, already
        started); the received rows."""
        ctx.save_for_backward(send_idx)
        ctx.num_rows, ctx.counts, ctx.group, ctx.stats = x.shape[0], (send_counts, recv_counts), \
            group, stats
        ctx.ring = ring
        if pending is None:
            pending = _start(x.index_select(0, send_idx), send_counts, recv_counts, group,
                             stats, False, ring)
        return pending.wait()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor):
        """Send the received rows' gradients back and sum them into ``x``'s rows (``index_add``)."""
        (send_idx,) = ctx.saved_tensors
        send_counts, recv_counts = ctx.counts
        back = _start(grad, recv_counts, send_counts, ctx.group, ctx.stats, True,
                      ctx.ring).wait()
        gx = grad.new_zeros((ctx.num_rows,) + tuple(grad.shape[1:]))
        gx.index_add_(0, send_idx, back)
        return gx, None, None, None, None, None, None, None


def _check(send_idx: torch.Tensor, send_counts: list[int], recv_counts: list[int]) -> None:
    if len(send_counts) != len(recv_counts):
        raise ValueError("send_counts and recv_counts need one entry per rank")
    if sum(send_counts) != send_idx.numel():
        raise ValueError(f"send_counts sum to {sum(send_counts)} but send_idx has "
                         f"{send_idx.numel()} entries")


def shuffle(x: torch.Tensor, send_idx: torch.Tensor, send_counts: list[int],
            recv_counts: list[int], group: ProcessGroup | None = None,
            stats: ShuffleStats | None = None, ring: bool = False,
            pending: _Pending | None = None) -> torch.Tensor:
    """Rows of ``x`` named by ``send_idx`` go to their peers; returns the rows received.

    ``send_counts[q]`` consecutive entries of ``send_idx`` go to rank ``q``; ``recv_counts[p]``
    rows arrive from rank ``p``, in rank order. Collective over ``group``: every rank calls it.
    ``pending`` (from :func:`start_shuffle` on the same arguments) finishes an exchange started
    earlier instead of starting one.
    """
    _check(send_idx, send_counts, recv_counts)
    return Shuffle.apply(x, send_idx.to(x.device), list(send_counts), list(recv_counts), group,
                         stats, ring, pending)


def start_shuffle(x: torch.Tensor, send_idx: torch.Tensor, send_counts: list[int],
                  recv_counts: list[int], group: ProcessGroup | None = None,
                  stats: ShuffleStats | None = None, ring: bool = False) -> _Pending:
    """Launch the forward exchange of :func:`shuffle` without waiting (all-to-all: async;
    ring: its steps run now). Pass the result to :func:`shuffle` as ``pending``."""
    _check(send_idx, send_counts, recv_counts)
    with torch.no_grad():
        rows = x.index_select(0, send_idx.to(x.device))
    return _start(rows, list(send_counts), list(recv_counts), group, stats, False, ring,
                  async_op=True)
