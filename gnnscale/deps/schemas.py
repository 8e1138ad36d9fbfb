"""Typed schemas of the ``deps`` options (torch-free: the launcher composes and checks a config
with these alone; each ``_target_`` names the implementation a rank builds)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gnnscale.registry import register

COST_KEYS = ("t_vertex", "t_edge", "t_comm")


@register("deps", "depcache")
@dataclass
class DepCacheConfig:
    """``deps=depcache``'s options."""

    _target_: str = "gnnscale.deps.depcache.DepCache"


@register("deps", "depcomm")
@dataclass
class DepCommConfig:
    """``deps=depcomm``'s options."""

    _target_: str = "gnnscale.deps.depcomm.DepComm"


@dataclass
class CostsConfig:
    """Per-dimension seconds of NeutronStar's model; all null = probe them on this machine."""

    t_vertex: float | None = None  # one multiply-add of a dense vertex update
    t_edge: float | None = None  # one edge, one feature, of an aggregation
    t_comm: float | None = None  # one float sent to another rank


@register("deps", "hybrid")
@dataclass
class HybridConfig:
    """``deps=hybrid``'s options."""

    _target_: str = "gnnscale.deps.hybrid.Hybrid"
    memory_cap_mb: float = 256.0  # replicated features + rows + edges per rank, at most
    comm_weight: float = 1.0  # scales the communication cost (>1 favours replication)
    mu: float = 1.0  # Eq. 3's factor on the recomputation cost, in (0, 1]
    # fixed per-dimension costs (deps.costs={t_vertex:..,t_edge:..,t_comm:..}): reproducible
    costs: CostsConfig = field(default_factory=CostsConfig)
