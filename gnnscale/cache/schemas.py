"""Typed schemas of the ``cache`` options (torch-free: the launcher composes and checks a
config with these alone; each ``_target_`` names the implementation a rank builds)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gnnscale.registry import register


class Placement(str, Enum):
    """Where cached rows live: the same hottest set on every rank, or disjoint per-rank sets."""

    replicated = "replicated"
    partitioned = "partitioned"


PLACEMENTS = tuple(p.value for p in Placement)


@dataclass
class CacheConfig:
    """Budget and placement fields every cache option shares (see ``CachePolicy``)."""

    _target_: str = ""
    ratio: float = 0.0
    bytes: int | None = None
    placement: Placement = Placement.replicated
    auto: bool = False
    reserve: float = 0.05


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
