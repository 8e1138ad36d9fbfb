"""Where a rank sits (world, host-local rank, device) and joining the process group.

The backend and device are resolved in one place, :func:`resolve_backend`, for spawned ranks
and torchrun alike: ``auto`` means nccl on CUDA and gloo on the CPU.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum

import torch
import torch.distributed as dist


class Backend(str, Enum):
    """``dist.backend``: a closed choice, checked when the config is composed."""

    auto = "auto"
    gloo = "gloo"
    nccl = "nccl"


class Device(str, Enum):
    """``dist.device``: a closed choice, checked when the config is composed."""

    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


@dataclass
class Topology:
    """Where this process sits: global rank, world, its host-local rank and device."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    device: torch.device


def _value(choice: str | Enum) -> str:
    return choice.value if isinstance(choice, Enum) else str(choice)


def resolve_backend(backend: str | Backend = "auto", device: str | Device = "auto",
                    cuda_available: bool | None = None) -> tuple[str, str]:
    """``(backend, device)`` with ``auto`` resolved; raises ``ValueError`` naming the setting
    to change when the pair cannot work on this host."""
    backend, device = _value(backend), _value(device)
    if backend not in Backend.__members__:
        raise ValueError(f"dist.backend must be one of {list(Backend.__members__)}, "
                         f"got {backend!r}")
    if device not in Device.__members__:
        raise ValueError(f"dist.device must be one of {list(Device.__members__)}, got {device!r}")
    cuda = torch.cuda.is_available() if cuda_available is None else cuda_available
    if backend == "nccl" and not cuda:
        raise ValueError("dist.backend=nccl needs CUDA, which this host lacks: set "
                         "dist.backend=gloo (or auto)")
    if backend == "nccl" and device == "cpu":
        raise ValueError("dist.backend=nccl cannot carry CPU tensors (dist.device=cpu): set "
                         "dist.backend=gloo (or auto), or dist.device=cuda")
    if device == "cuda" and not cuda:
        raise ValueError("dist.device=cuda but CUDA is not available on this host: set "
                         "dist.device=cpu (or auto)")
    if device == "auto":
        device = "cuda" if cuda and backend != "gloo" else "cpu"
    if backend == "auto":
        backend = "nccl" if device == "cuda" else "gloo"
    return backend, device


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def under_torchrun() -> bool:
    """True when torchrun (or another elastic launcher) set up this process."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def init_process_group(
    rank: int,
    world_size: int,
    *,
    backend: str = "auto",
    device: str = "auto",
    addr: str = "127.0.0.1",
    port: int | None = None,
    timeout_s: float = 300.0,
    local_rank: int | None = None,
    local_world_size: int | None = None,
) -> Topology:
    """Join the process group (backend and device as :func:`resolve_backend` says)."""
    local_rank = rank if local_rank is None else local_rank
    backend, device = resolve_backend(backend, device)
    dev = torch.device("cpu")
    if device == "cuda":
        index = local_rank % torch.cuda.device_count()
        torch.cuda.set_device(index)
        dev = torch.device("cuda", index)
    if not dist.is_initialized():
        init = f"tcp://{addr}:{port}" if port else "env://"
        dist.init_process_group(
            backend, init_method=init, rank=rank, world_size=world_size,
            timeout=timedelta(seconds=timeout_s),
        )
    return Topology(rank, world_size, local_rank, local_world_size or world_size, dev)


def topology_from_env(backend: str = "auto", device: str = "auto",
                      timeout_s: float = 300.0) -> Topology:
    """Join the process group described by torchrun's environment variables."""
    return init_process_group(
        int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), backend=backend, device=device,
        timeout_s=timeout_s, local_rank=int(os.environ.get("LOCAL_RANK", 0)),
        local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", 1)),
    )
