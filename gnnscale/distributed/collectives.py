"""Collective helpers shared by the runner, the caches and the strategies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from gnnscale.distributed.device import Purpose, comm_device, group_backend
from gnnscale.distributed.topology import run_timeout


def new_group(ranks: Sequence[int] | None = None, purpose: Purpose | str = Purpose.world,
              **kwargs: Any) -> dist.ProcessGroup:
    """A subgroup of ``ranks`` for what it carries (``purpose``: its backend is the device
    seam's choice, :func:`~gnnscale.distributed.device.group_backend`), with the run's deadline
    (``dist.timeout_s``, as the world group has) instead of PyTorch's 30-minute default for
    subgroups; every rank of the world must call it, in the same order."""
    for key in ("timeout", "backend"):
        if key in kwargs:
            raise TypeError(f"new_group takes no {key}: the run's deadline (dist.timeout_s) "
                            "and the purpose's backend apply")
    ranks = None if ranks is None else list(ranks)
    return dist.new_group(ranks, timeout=run_timeout(), backend=group_backend(purpose),
                          **kwargs)


def all_reduce_host(t: torch.Tensor, op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM,
                    group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """All-reduce ``t`` in place on any backend, staged through the group's device
    (:func:`~gnnscale.distributed.device.comm_device`: a host tensor rides a GPU copy under
    nccl, and is reduced as it is under gloo); returns ``t``."""
    dev = comm_device(group)
    if t.device == dev:
        dist.all_reduce(t, op=op, group=group)
        return t
    staged = t.to(dev)
    dist.all_reduce(staged, op=op, group=group)
    return t.copy_(staged)


def all_to_all_host(out: torch.Tensor, inp: torch.Tensor, out_splits: list[int] | None = None,
                    in_splits: list[int] | None = None,
                    group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``all_to_all_single(out, inp, out_splits, in_splits)`` on any backend, staged through
    the group's device like :func:`all_reduce_host`; returns ``out``."""
    dev = comm_device(group)
    if out.device == dev and inp.device == dev:
        dist.all_to_all_single(out, inp, out_splits, in_splits, group=group)
        return out
    staged = torch.empty_like(out, device=dev)
    dist.all_to_all_single(staged, inp.to(dev), out_splits, in_splits, group=group)
    return out.copy_(staged)


def _row_counts(part: torch.Tensor, group: dist.ProcessGroup | None, dev: torch.device
                ) -> list[int]:
    """Every rank's row count of ``part``, in group-rank order (collective)."""
    n = torch.tensor([part.shape[0]], device=dev)
    counts = [torch.zeros_like(n) for _ in range(dist.get_world_size(group))]
    dist.all_gather(counts, n, group=group)
    return [int(c) for c in counts]


def all_gather_rows(part: torch.Tensor, group: dist.ProcessGroup | None = None,
                    fill: float = 0) -> list[torch.Tensor]:
    """Every rank's ``part`` (row counts may differ), in group-rank order, on ``part``'s device.

    Pads to the longest part with ``fill`` for the all-gather (gloo and nccl need equal sizes);
    one process (no group) gets ``[part]``. For the parts stacked, :func:`gather_rows`.
    """
    if not dist.is_initialized() or dist.get_world_size(group) == 1:
        return [part]
    dev = comm_device(group)
    sizes = _row_counts(part, group, dev)
    pad = torch.full((max(sizes), *part.shape[1:]), fill, dtype=part.dtype, device=dev)
    pad[: part.shape[0]] = part.to(dev)
    bufs = [torch.empty_like(pad) for _ in sizes]
    dist.all_gather(bufs, pad, group=group)
    return [b[:s].to(part.device) for b, s in zip(bufs, sizes)]


def gather_rows(part: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Every rank's ``part`` stacked in group-rank order (row counts may differ), as
    ``torch.cat(all_gather_rows(part, group))`` is, on ``part``'s device, in ONE buffer: the
    ranks' rows are received straight into it (padded to the longest part, then moved down
    where parts are shorter), so a gather of the whole graph's rows needs about one copy of
    them, not the three (padded parts, received buffers, their concatenation) that
    :func:`all_gather_rows` and a concatenation hold at once. One process gets ``part``
    itself."""
    if not dist.is_initialized() or dist.get_world_size(group) == 1:
        return part
    dev = comm_device(group)
    sizes = _row_counts(part, group, dev)
    most = max(sizes)
    if most == 0:  # every part empty (the same on every rank: no collective skipped apart)
        return part.new_empty((0, *part.shape[1:]))
    mine = part.to(dev).contiguous()
    if mine.shape[0] < most:  # gloo and nccl gather equal sizes
        mine = torch.cat([mine, mine.new_zeros((most - mine.shape[0], *part.shape[1:]))])
    full = torch.empty((len(sizes) * most, *part.shape[1:]), dtype=part.dtype, device=dev)
    dist.all_gather(list(full.split(most)), mine, group=group)
    del mine
    at = 0
    for r, size in enumerate(sizes):  # close the padding: rank r's rows move down to ``at``
        if at != r * most and size:
            full[at:at + size] = full[r * most:r * most + size].clone()  # may overlap: a copy
        at += size
    return full[:at].to(part.device)


def group_rank(group: dist.ProcessGroup | None = None) -> int:
    """This process's rank in ``group`` (0 without a process group)."""
    return dist.get_rank(group) if dist.is_initialized() else 0


def group_size(group: dist.ProcessGroup | None = None) -> int:
    """The size of ``group`` (1 without a process group)."""
    return dist.get_world_size(group) if dist.is_initialized() else 1


def sum_gradients(params: list[torch.nn.Parameter], loss: torch.Tensor,
                  group: dist.ProcessGroup | None = None) -> tuple[float, int]:
    """Sum every parameter's gradient and ``loss`` over ``group`` in one flat all-reduce
    (a missing gradient counts as zeros); returns the summed loss and the bytes reduced."""
    if not dist.is_initialized() or dist.get_world_size(group) == 1:
        return float(loss), 0
    flat = torch.cat([p.grad.reshape(-1) if p.grad is not None else
                      torch.zeros(p.numel(), device=loss.device) for p in params]
                     + [loss.detach().reshape(1)])
    dist.all_reduce(flat, group=group)
    pos = 0
    for p in params:
        g = flat[pos:pos + p.numel()].view_as(p)
        if p.grad is None:
            p.grad = g.clone()
        else:
            p.grad.copy_(g)
        pos += p.numel()
    return float(flat[-1]), flat.numel() * flat.element_size()
