"""Typed schemas of the ``dist`` options (torch-free: the launcher composes and checks a config
with these alone; the ``_target_`` names the launcher that starts the ranks, whose constructor
runs the same :meth:`check` and then asks the host whether it has what the backend and device
need)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum

from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.schema import Options, require_at_least

#: The longest deadline ``dist.timeout_s`` takes: one week (waits count it in nanoseconds).
MAX_TIMEOUT_S = 7 * 24 * 3600.0


def under_torchrun() -> bool:
    """True when torchrun (or another elastic launcher) set up this process (torch-free: the
    launcher's checks ask it before importing torch)."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


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
class LocalDistConfig(Options):
    """``dist=local``'s options."""

    _target_: str = "gnnscale.distributed.local.Launcher"
    world_size: int = 2
    backend: Backend = Backend.auto
    device: Device = Device.auto
    timeout_s: float = 300.0
    #: starting the ranks and their rendezvous (dist.timeout_s arms once every rank is up)
    startup_timeout_s: float = 600.0
    threads_per_rank: int = 0  # 0: the host's free cores / local ranks
    #: each spawned rank on its own block of free cores (docs/distributed.md)
    bind_cores: bool = True

    def check(self) -> None:
        """At least one rank, deadlines (run, start-up) in (0 s, one week], threads in
        [0, this host's cores], known backend and device."""
        require_at_least("dist.world_size", self.world_size, 1)
        for key in ("timeout_s", "startup_timeout_s"):
            value = getattr(self, key)
            if not 0 < value <= MAX_TIMEOUT_S:
                raise ConfigError(f"dist.{key} must lie in (0, {MAX_TIMEOUT_S:g}] seconds (one "
                                  "week: the deadline becomes nanoseconds in 64-bit waits), "
                                  f"got {value:g}")
        require_at_least("dist.threads_per_rank", self.threads_per_rank, 0,
                         " (0: the host's free cores / local ranks)")
        cores = os.cpu_count() or 1
        if self.threads_per_rank > cores:
            raise ConfigError(f"dist.threads_per_rank must be <= {cores}, this host's cores "
                              "(more intra-op threads than cores only contend, and every rank "
                              f"would start them), got {self.threads_per_rank}")
        for key, choices in (("backend", Backend), ("device", Device)):
            value = getattr(self, key)
            if getattr(value, "value", value) not in choices.__members__:
                raise ConfigError(f"dist.{key} must be one of {list(choices.__members__)}, "
                                  f"got {value!r}")
