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
    #: the disk tier (:mod:`gnnscale.cache.disk`): null = when the features exceed the memory
    #: budget, true = always (features memory-mapped from a processed folder), false = never
    disk: bool | None = None
    #: requests the disk tier keeps in flight
    disk_depth: int = 64
    #: the disk tier's block in bytes (a multiple of 512; null: the device's logical block
    #: size, its smallest direct read)
    disk_block: int | None = None
    #: memory a rank may hold of the features (bytes or "8GiB"); null: dataset.memory_budget,
    #: else the host's memory
    memory_budget: str | None = None
    #: the disk tier's file in a locality order (gnnscale/cache/layout.py): none, degree, bfs
    disk_order: str = "none"
    #: steps whose disk reads start while an earlier step computes (0: none)
    disk_ahead: int = 2
    #: the dtype every tier holds the features in (float16, bfloat16: half the bytes, rounded
    #: to nearest once, up-cast to float32 on gather)
    feature_dtype: str = "float32"
    #: bytes of the host tier per rank (the next hottest rows after the cache tier's, in host
    #: memory: pinned on a GPU), between the cache tier and the disk; null: none
    host_bytes: int | None = None

    def check(self) -> None:
        """A ratio in [0, 1], a byte budget >= 0, a known placement, a reserve in [0, 1), a
        depth >= 1, a block a multiple of 512, a memory budget that holds the cache's bytes."""
        require_range("cache.ratio", float(self.ratio), 0, 1, closed=True,
                      note=" (fraction of vertices each rank caches)")
        if self.bytes is not None:
            require_at_least("cache.bytes", self.bytes, 0, " (a byte budget per rank)")
        if self.host_bytes is not None:
            require_at_least("cache.host_bytes", self.host_bytes, 0,
                             " (the host tier's bytes per rank)")
        require_one_of("cache.placement", self.placement, PLACEMENTS)
        require_range("cache.reserve", self.reserve, 0, 1)
        require_range("cache.disk_depth", self.disk_depth, 1, 1025,
                      note=" (disk reads in flight)")
        if self.disk_block is not None and (self.disk_block < 512 or self.disk_block % 512):
            raise ConfigError(f"cache.disk_block must be a positive multiple of 512 bytes, "
                              f"got {self.disk_block}")
        require_range("cache.disk_ahead", self.disk_ahead, 0, 65, note=" (steps read ahead)")
        require_one_of("cache.feature_dtype", self.feature_dtype,
                       ("float32", "float16", "bfloat16"))
        require_one_of("cache.disk_order", self.disk_order, ("none", "degree", "bfs"))
        budget = memory_bytes(self.memory_budget)
        if budget is not None and self.host_bytes is not None and self.host_bytes > budget:
            raise ConfigError(f"cache.memory_budget={self.memory_budget!r} cannot hold the "
                              f"host tier's cache.host_bytes={self.host_bytes}: give at least "
                              f"cache.memory_budget={self.host_bytes}, or a smaller "
                              f"cache.host_bytes")
        if budget is not None and self.bytes is not None and self.bytes > budget:
            raise ConfigError(f"cache.memory_budget={self.memory_budget!r} cannot hold the "
                              f"cache's cache.bytes={self.bytes}: give at least "
                              f"cache.memory_budget={self.bytes}, or a smaller cache.bytes")


def memory_bytes(value: object, key: str = "cache.memory_budget") -> int | None:
    """A memory budget in bytes from an int or text (``8GB``, ``512MiB``); None when unset."""
    from gnnscale.data.schemas import parse_budget

    return parse_budget(value, key)


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
