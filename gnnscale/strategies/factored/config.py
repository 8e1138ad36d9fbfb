"""``strategy=factored``'s typed schema (torch-free: the launcher composes and checks with it)."""

from __future__ import annotations

from dataclasses import dataclass

from gnnscale.registry import register


@register("strategy", "factored")
@dataclass
class FactoredConfig:
    """``strategy=factored``'s options."""

    _target_: str = "gnnscale.strategies.factored.Factored"
    batch_size: int = 1024  # global mini-batch (all trainers together)
    samplers: str = "auto"  # sampler ranks: a count, or auto (GNNLab's rule, profiled)
    queue_depth: int = 2  # jobs one sampler may have in flight per trainer
    staleness: int = 0  # steps a rank may run ahead of the slowest (0: synchronous, exact)
    switching: bool = False  # finished samplers train as standby trainers while it pays
    queue: str = "shared"  # shared: one ring any trainer takes from (one host); routes: p2p
    prefetch: int = 1  # shared queue: jobs a trainer claims and gathers ahead of training
    queue_slot_mb: int = 256  # shared queue: bound of one job in the ring (MiB, sparse)
