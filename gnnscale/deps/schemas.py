"""Typed schemas of the ``deps`` options (torch-free: the launcher composes and checks a config
with these alone; each ``_target_`` names the implementation a rank builds, whose constructor
runs the same :meth:`check`). Each schema also says what a strategy's checks read:
:attr:`replicates_all`, :attr:`replicates_none` and :meth:`budget_bytes`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.schema import Options

COST_KEYS = ("t_vertex", "t_edge", "t_comm")


@dataclass
class DepsConfig(Options):
    """Base of the deps options: what the manager replicates, and its memory budget."""

    #: every dependency replicated (strategies that cannot communicate check it)
    replicates_all: ClassVar[bool] = False
    #: no dependency ever replicated (every remote row is communicated)
    replicates_none: ClassVar[bool] = False
    _target_: str = ""

    def budget_bytes(self) -> int | None:
        """Bytes a rank may spend on replicated features, rows and edges (None: no cap)."""
        return None


@register("deps", "depcache")
@dataclass
class DepCacheConfig(DepsConfig):
    """``deps=depcache``'s options."""

    replicates_all: ClassVar[bool] = True
    _target_: str = "gnnscale.deps.depcache.DepCache"


@register("deps", "depcomm")
@dataclass
class DepCommConfig(DepsConfig):
    """``deps=depcomm``'s options."""

    replicates_none: ClassVar[bool] = True
    _target_: str = "gnnscale.deps.depcomm.DepComm"

    def budget_bytes(self) -> int:
        """0: nothing is replicated."""
        return 0


@dataclass
class CostsConfig:
    """Per-dimension seconds of NeutronStar's model; all null = probe them on this machine."""

    t_vertex: float | None = None  # one multiply-add of a dense vertex update
    t_edge: float | None = None  # one edge, one feature, of an aggregation
    t_comm: float | None = None  # one float sent to another rank
    t_sync: float | None = None  # one exchange's fixed cost (optional with the others: 0)


def given_costs(costs: Any) -> dict[str, float]:
    """The fixed costs among ``costs`` (a mapping or :class:`CostsConfig`): all three of
    :data:`COST_KEYS` non-negative (and ``t_sync``, optional, 0 when left out), or none (probe
    them); a :class:`ConfigError` otherwise."""
    if costs is not None and not isinstance(costs, dict):
        costs = {k: getattr(costs, k, None) for k in (*COST_KEYS, "t_sync")}
    given = {k: v for k, v in dict(costs or {}).items() if v is not None}
    if given and (sorted(k for k in given if k != "t_sync") != sorted(COST_KEYS)
                  or any(float(v) < 0 for v in given.values())):
        raise ConfigError(f"deps.costs must give all of {COST_KEYS} (and optionally t_sync) "
                          f"as non-negative seconds (or none, to probe them), got {given}")
    return {k: float(v) for k, v in given.items()}


@register("deps", "hybrid")
@dataclass
class HybridConfig(DepsConfig):
    """``deps=hybrid``'s options."""

    _target_: str = "gnnscale.deps.hybrid.Hybrid"
    memory_cap_mb: float = 256.0  # replicated features + rows + edges per rank, at most
    comm_weight: float = 1.0  # scales the communication cost (>1 favours replication)
    mu: float = 1.0  # Eq. 3's factor on the recomputation cost, in (0, 1]
    # fullgraph: the hybrid's own plan is kept only when predicted this much faster than the
    # better fixed plan (DepCache within the budget, DepComm), else that fixed plan runs
    margin: float = 0.01
    # fixed per-dimension costs (deps.costs={t_vertex:..,t_edge:..,t_comm:..}): reproducible
    costs: CostsConfig = field(default_factory=CostsConfig)

    def check(self) -> None:
        """A cap >= 0, a communication weight > 0, ``mu`` in (0, 1], ``margin`` in [0, 1), all
        costs or none."""
        if self.memory_cap_mb < 0:
            raise ConfigError(f"deps.memory_cap_mb must be >= 0, got {self.memory_cap_mb}")
        if self.comm_weight <= 0:
            raise ConfigError(f"deps.comm_weight must be > 0, got {self.comm_weight}")
        if not 0 < self.mu <= 1:
            raise ConfigError(f"deps.mu must be in (0, 1], got {self.mu}")
        if not 0 <= self.margin < 1:
            raise ConfigError(f"deps.margin must be in [0, 1), got {self.margin}")
        given_costs(self.costs)

    def budget_bytes(self) -> int:
        """``memory_cap_mb`` in bytes."""
        return int(self.memory_cap_mb * 2**20)
