"""Typed schemas of the ``cache`` options (torch-free: the launcher composes and checks a
config with these alone; each ``_target_`` names the implementation a rank builds, whose
constructor runs the same :meth:`check`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.schema import Options


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
        if not 0.0 <= float(self.ratio) <= 1.0:
            raise ConfigError(f"cache.ratio must lie in [0, 1] (fraction of vertices each rank "
                              f"caches), got {self.ratio}")
        if self.bytes is not None and self.bytes < 0:
            raise ConfigError(f"cache.bytes must be >= 0 (a byte budget per rank), "
                              f"got {self.bytes}")
        if self.placement not in PLACEMENTS:
            raise ConfigError(f"cache.placement must be one of {PLACEMENTS}, "
                              f"got {self.placement!r}")
        if not 0.0 <= self.reserve < 1.0:
            raise ConfigError(f"cache.reserve must lie in [0, 1), got {self.reserve}")


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
        if self.epochs < 1:
            raise ConfigError(f"cache.epochs (K of PreSC#K) must be >= 1, got {self.epochs}")


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
