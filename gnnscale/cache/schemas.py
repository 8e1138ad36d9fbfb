"""Typed schemas of the ``cache`` options (torch-free: the launcher composes and checks a
config with these alone; each ``_target_`` names the implementation a rank builds, whose
constructor runs the same :meth:`check`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.schema import Options, require_at_least, require_one_of, require_range


class Placement(str, Enum):
    """Where cached rows live: the same hottest set on every rank, or disjoint per-rank sets."""

    replicated = "replicated"
    partitioned = "partitioned"


PLACEMENTS = tuple(p.value for p in Placement)


@dataclass
class CacheConfig(Options):
    """Budget and placement fields every cache option shares (see ``CachePolicy``)."""

    _target_: str = ""
    ratio: float = 0.0
    bytes: int | None = None
    placement: Placement = Placement.replicated
    auto: bool = False
    reserve: float = 0.05

    def check(self) -> None:
        """A ratio in [0, 1], a byte budget >= 0, a known placement, a reserve in [0, 1)."""
        require_range("cache.ratio", float(self.ratio), 0, 1, closed=True,
                      note=" (fraction of vertices each rank caches)")
        if self.bytes is not None:
            require_at_least("cache.bytes", self.bytes, 0, " (a byte budget per rank)")
        require_one_of("cache.placement", self.placement, PLACEMENTS)
        require_range("cache.reserve", self.reserve, 0, 1)


@register("cache", "none")
@dataclass
class NoCacheConfig(CacheConfig):
    """``cache=none``'s options."""

    _target_: str = "gnnscale.cache.none.NoCache"


@register("cache", "degree")
@dataclass
class DegreeCacheConfig(CacheConfig):
    """``cache=degree``'s options."""

    _target_: str = "gnnscale.cache.degree.DegreePolicy"


@register("cache", "presample")
@dataclass
class PresampleCacheConfig(CacheConfig):
    """``cache=presample``'s options."""

    _target_: str = "gnnscale.cache.presample.PresamplePolicy"
    epochs: int = 1

    def check(self) -> None:
        """The budget's checks, and K >= 1 pre-sampled epochs."""
        super().check()
        require_at_least("cache.epochs", self.epochs, 1, " (K of PreSC#K)")


@register("cache", "random")
@dataclass
class RandomCacheConfig(CacheConfig):
    """``cache=random``'s options."""

    _target_: str = "gnnscale.cache.random.RandomPolicy"
    seed: int | None = None


@register("cache", "oracle")
@dataclass
class OracleCacheConfig(CacheConfig):
    """``cache=oracle``'s options."""

    _target_: str = "gnnscale.cache.oracle.OraclePolicy"
    epochs: int = 1
    first_epoch: int = 0

    def check(self) -> None:
        """The budget's checks, and epochs >= 1 from a first epoch >= 0."""
        super().check()
        if self.epochs < 1 or self.first_epoch < 0:
            raise ConfigError(f"cache.epochs must be >= 1 and cache.first_epoch >= 0, got "
                              f"{self.epochs} and {self.first_epoch}")
