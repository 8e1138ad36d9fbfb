"""The dependency shuffle: an autograd Function that sends rows to the ranks that need them.

Forward: rank ``r`` sends peer ``q`` the rows ``x[send_idx[q-th slice]]`` (one coalesced
message per peer, ``all_to_all_single`` with split sizes) and receives ``sum(recv_counts)``
rows, peer by peer. Backward: the received rows' gradients travel back the same way and are
summed into the sender's rows (``index_add``), so a row read by several ranks gets the sum of
their gradients. Generic: the split strategy and full-graph training both describe a shuffle
by ``send_idx`` + ``send_counts`` + ``recv_counts``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class ShuffleStats:
    """Seconds spent in shuffles and bytes sent by this rank (forward and backward)."""

    seconds: float = 0.0
    bytes_sent: int = 0

    def reset(self) -> None:
        self.seconds, self.bytes_sent = 0.0, 0


def _exchange(send: torch.Tensor, send_counts: list[int], recv_counts: list[int],
              group, stats: ShuffleStats | None) -> torch.Tensor:
    recv = send.new_empty((sum(recv_counts),) + tuple(send.shape[1:]))
    t0 = time.perf_counter()
    dist.all_to_all_single(recv, send.contiguous(), recv_counts, send_counts, group=group)
    if stats is not None:
        stats.seconds += time.perf_counter() - t0
        stats.bytes_sent += send.numel() * send.element_size()
    return recv


class Shuffle(torch.autograd.Function):
    """``recv = shuffle(x, send_idx, send_counts, recv_counts)``; see the module docstring."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, send_idx: torch.Tensor, send_counts: list[int],
                recv_counts: list[int], group=None, stats: ShuffleStats | None = None):
        ctx.save_for_backward(send_idx)
        ctx.num_rows, ctx.counts, ctx.group, ctx.stats = x.shape[0], (send_counts, recv_counts), \
            group, stats
        return _exchange(x.index_select(0, send_idx), send_counts, recv_counts, group, stats)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (send_idx,) = ctx.saved_tensors
        send_counts, recv_counts = ctx.counts
        back = _exchange(grad, recv_counts, send_counts, ctx.group, ctx.stats)
        gx = grad.new_zeros((ctx.num_rows,) + tuple(grad.shape[1:]))
        gx.index_add_(0, send_idx, back)
        return gx, None, None, None, None, None


def shuffle(x: torch.Tensor, send_idx: torch.Tensor, send_counts: list[int],
            recv_counts: list[int], group=None, stats: ShuffleStats | None = None) -> torch.Tensor:
    """Rows of ``x`` named by ``send_idx`` go to their peers; returns the rows received.

    ``send_counts[q]`` consecutive entries of ``send_idx`` go to rank ``q``; ``recv_counts[p]``
    rows arrive from rank ``p``, in rank order. Collective over ``group``: every rank calls it.
    """
    if len(send_counts) != len(recv_counts):
        raise ValueError("send_counts and recv_counts need one entry per rank")
    if sum(send_counts) != send_idx.numel():
        raise ValueError(f"send_counts sum to {sum(send_counts)} but send_idx has "
                         f"{send_idx.numel()} entries")
    return Shuffle.apply(x, send_idx.to(x.device), list(send_counts), list(recv_counts), group,
                         stats)
