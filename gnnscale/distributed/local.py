"""Launch option ``dist=local``: torchrun's environment when present, else local processes.

Multi-node runs go through torchrun (see docs/distributed.md); a single host needs nothing:
``dist.world_size`` processes are spawned on free loopback ports.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch.distributed as dist

from gnnscale.distributed.launch import spawn, topology_from_env, under_torchrun
from gnnscale.registry import register

BACKENDS = ("auto", "gloo", "nccl")
DEVICES = ("auto", "cpu", "cuda")


@register("dist", "local")
@dataclass
class LocalDistConfig:
    _target_: str = "gnnscale.distributed.local.Launcher"
    world_size: int = 2
    backend: str = "auto"
    device: str = "auto"
    timeout_s: float = 300.0
    threads_per_rank: int = 0  # 0: host cores / local ranks


class Launcher:
    """Runs ``fn(topology, *args)`` on every rank and returns the results (rank order)."""

    def __init__(self, world_size: int = 2, backend: str = "auto", device: str = "auto",
                 timeout_s: float = 300.0, threads_per_rank: int = 0) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"dist.backend must be one of {BACKENDS}, got {backend!r}")
        if device not in DEVICES:
            raise ValueError(f"dist.device must be one of {DEVICES}, got {device!r}")
        if backend == "nccl" and device == "cpu":
            raise ValueError("dist.backend=nccl needs dist.device=cuda (or auto on a GPU host)")
        self.backend, self.device, self.timeout_s = backend, device, timeout_s
        self.threads_per_rank = threads_per_rank
        self.world_size = int(os.environ["WORLD_SIZE"]) if under_torchrun() else world_size
        if self.world_size < 1:
            raise ValueError(f"dist.world_size must be >= 1, got {world_size}")

    def launch(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        if under_torchrun():
            topo = topology_from_env(self.backend, self.device, self.timeout_s)
            try:
                return [fn(topo, *args)]
            finally:
                dist.destroy_process_group()
        backend = self.backend
        if backend == "auto":
            import torch
            backend = "nccl" if self.device != "cpu" and torch.cuda.is_available() else "gloo"
        device = self.device if self.device != "auto" else ("cuda" if backend == "nccl" else "cpu")
        return spawn(fn, self.world_size, *args, backend=backend, device=device,
                     timeout_s=self.timeout_s, threads_per_rank=self.threads_per_rank or None)
