"""Collective helpers shared by the runner, the caches and the strategies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from gnnscale.distributed.topology import run_timeout


def new_group(ranks: Sequence[int] | None = None, backend: str | None = None,
              **kwargs: Any) -> dist.ProcessGroup:
    """``dist.new_group(ranks, backend=backend, ...)`` with the run's deadline
    (``dist.timeout_s``, as the world group has) instead of PyTorch's 30-minute default for
    subgroups; every rank of the world must call it, in the same order."""
    if "timeout" in kwargs:
        raise TypeError("new_group takes the run's deadline (dist.timeout_s); pass no timeout")
    ranks = None if ranks is None else list(ranks)
    return dist.new_group(ranks, timeout=run_timeout(), backend=backend, **kwargs)


def comm_device(group: dist.ProcessGroup | None = None) -> torch.device:
    """Where a collective's tensors must live: this rank's GPU under nccl, else the CPU."""
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_gather_rows(part: torch.Tensor, group: dist.ProcessGroup | None = None,
                    fill: float = 0) -> list[torch.Tensor]:
    """Every rank's ``part`` (row counts may differ), in group-rank order, on ``part``'s device.

    Pads to the longest part with ``fill`` for the all-gather (gloo and nccl need equal sizes);
    one process (no group) gets ``[part]``.
    """
    if not dist.is_initialized() or dist.get_world_size(group) == 1:
        return [part]
    world, dev = dist.get_world_size(group), comm_device(group)
    n = torch.tensor([part.shape[0]], device=dev)
    sizes = [torch.zeros_like(n) for _ in range(world)]
    dist.all_gather(sizes, n, group=group)
    most = max(int(s) for s in sizes)
    pad = torch.full((most, *part.shape[1:]), fill, dtype=part.dtype, device=dev)
    pad[: part.shape[0]] = part.to(dev)
    bufs = [torch.empty_like(pad) for _ in range(world)]
    dist.all_gather(bufs, pad, group=group)
    return [b[: int(s)].to(part.device) for b, s in zip(bufs, sizes)]


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
