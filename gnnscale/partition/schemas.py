"""Typed schemas of the ``partitioner`` options (torch-free: the launcher composes and checks a
config with these alone; each ``_target_`` names the implementation a rank builds, whose
constructor runs the same :meth:`check`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.schema import Options, require_at_least, require_one_of


class VertexWeights(str, Enum):
    """What METIS balances besides edges and training vertices."""

    none = "none"
    sample_frequency = "sample_frequency"


class Method(str, Enum):
    """METIS's algorithm: k-way or recursive bisection."""

    kway = "kway"
    recursive = "recursive"


VERTEX_WEIGHTS = tuple(v.value for v in VertexWeights)
METHODS = tuple(m.value for m in Method)
EDGE_CUT_MASTERS = ("metis", "random", "range", "ldg", "fennel")
MASTER_SOURCES = ("blocked",) + EDGE_CUT_MASTERS
#: the order a streaming partitioner (ldg, fennel) sees the vertices in
STREAM_ORDERS = ("natural", "random")


def _imbalance(value: float) -> None:
    if not value >= 1.0:
        raise ConfigError(f"partitioner.imbalance is a max/mean ratio >= 1 (e.g. 1.05), "
                          f"got {value}")


@dataclass
class PartitionerConfig(Options):
    """Fields every partitioner option shares; :attr:`kind` is what it produces."""

    #: ``edge_cut`` (vertex -> part) or ``vertex_cut`` (edges -> parts, masters and mirrors)
    kind: ClassVar[str] = "edge_cut"
    _target_: str = ""
    seed: int = 0


@register("partitioner", "metis")
@dataclass
class MetisConfig(PartitionerConfig):
    """``partitioner=metis``'s options."""

    _target_: str = "gnnscale.partition.metis.MetisPartitioner"
    balance_vertices: bool = True
    balance_train: bool = True
    balance_edges: bool = True
    imbalance: float = 1.05
    vertex_weights: VertexWeights = VertexWeights.none
    rebalance: bool = True
    method: Method = Method.kway

    def check(self) -> None:
        """A max/mean ratio >= 1 and known choices."""
        _imbalance(self.imbalance)
        require_one_of("partitioner.vertex_weights", self.vertex_weights, VERTEX_WEIGHTS)
        require_one_of("partitioner.method", self.method, METHODS)

    @classmethod
    def checked(cls, imbalance: float, vertex_weights: str, method: str) -> MetisConfig:
        """The options of a partitioner made in code (choices as text), checked as
        :meth:`check` checks a composed config."""
        _imbalance(imbalance)
        require_one_of("partitioner.vertex_weights", vertex_weights, VERTEX_WEIGHTS)
        require_one_of("partitioner.method", method, METHODS)
        return cls(imbalance=imbalance, vertex_weights=VertexWeights(vertex_weights),
                   method=Method(method))


@register("partitioner", "random")
@dataclass
class RandomConfig(PartitionerConfig):
    """``partitioner=random``'s options."""

    _target_: str = "gnnscale.partition.random.RandomPartitioner"


@register("partitioner", "range")
@dataclass
class RangeConfig(PartitionerConfig):
    """``partitioner=range``'s options."""

    _target_: str = "gnnscale.partition.range.RangePartitioner"
    alpha: float | None = None

    def check(self) -> None:
        """``alpha`` >= 0 or null."""
        if self.alpha is not None:
            require_at_least("partitioner.alpha", self.alpha, 0,
                             " (or null for Gemini's 8(p-1))")


@register("partitioner", "ldg")
@dataclass
class LdgConfig(PartitionerConfig):
    """``partitioner=ldg``'s options."""

    _target_: str = "gnnscale.partition.ldg.LdgPartitioner"
    imbalance: float = 1.05
    order: str = "natural"

    def check(self) -> None:
        """A max/mean ratio >= 1 and a known order."""
        _imbalance(self.imbalance)
        require_one_of("partitioner.order", self.order, STREAM_ORDERS)


@register("partitioner", "fennel")
@dataclass
class FennelConfig(PartitionerConfig):
    """``partitioner=fennel``'s options."""

    _target_: str = "gnnscale.partition.fennel.FennelPartitioner"
    imbalance: float = 1.1
    gamma: float = 1.5
    alpha: float | None = None
    order: str = "natural"

    def check(self) -> None:
        """A max/mean ratio >= 1, ``gamma`` > 1 and a known order."""
        _imbalance(self.imbalance)
        if not self.gamma > 1.0:
            raise ConfigError(f"partitioner.gamma must be > 1 (the paper uses 1.5), "
                              f"got {self.gamma}")
        require_one_of("partitioner.order", self.order, STREAM_ORDERS)


@dataclass
class VertexCutConfig(PartitionerConfig):
    """Options every vertex-cut partitioner takes: its seed and where masters come from."""

    kind: ClassVar[str] = "vertex_cut"
    masters: str = "blocked"

    def check(self) -> None:
        """Masters from ``blocked`` or an edge-cut partitioner."""
        require_one_of("partitioner.masters", self.masters, MASTER_SOURCES,
                       " (an edge-cut partitioner or blocked)")


@register("partitioner", "oec")
@dataclass
class OecConfig(VertexCutConfig):
    """``partitioner=oec``'s options."""

    _target_: str = "gnnscale.partition.oec.OecPartitioner"


@register("partitioner", "iec")
@dataclass
class IecConfig(VertexCutConfig):
    """``partitioner=iec``'s options."""

    _target_: str = "gnnscale.partition.iec.IecPartitioner"


@register("partitioner", "cvc")
@dataclass
class CvcConfig(VertexCutConfig):
    """``partitioner=cvc``'s options."""

    _target_: str = "gnnscale.partition.cvc.CvcPartitioner"
    rows: int | None = None
    require_square: bool = False


@register("partitioner", "hvc")
@dataclass
class HvcConfig(VertexCutConfig):
    """``partitioner=hvc``'s options."""

    _target_: str = "gnnscale.partition.hvc.HvcPartitioner"
    threshold: int = 100

    def check(self) -> None:
        """Masters as every vertex-cut's, and an in-degree threshold >= 0."""
        super().check()
        require_at_least("partitioner.threshold", self.threshold, 0, " (an in-degree)")
