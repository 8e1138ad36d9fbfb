"""Typed schemas of the ``dist`` options (torch-free: the launcher composes and checks a config
with these alone; the ``_target_`` names the launcher that starts the ranks)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gnnscale.registry import register


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


@register("dist", "local")
@dataclass
class LocalDistConfig:
    """``dist=local``'s options."""

    _target_: str = "gnnscale.distributed.local.Launcher"
    world_size: int = 2
    backend: Backend = Backend.auto
    device: Device = Device.auto
    timeout_s: float = 300.0
    threads_per_rank: int = 0  # 0: host cores / local ranks
