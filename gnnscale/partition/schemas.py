"""Typed schemas of the ``partitioner`` options (torch-free: the launcher composes and checks a
config with these alone; each ``_target_`` names the implementation a rank builds)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gnnscale.registry import register


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


@register("partitioner", "metis")
@dataclass
class MetisConfig:
    """``partitioner=metis``'s options."""

    _target_: str = "gnnscale.partition.metis.MetisPartitioner"
    seed: int = 0
    balance_vertices: bool = True
    balance_train: bool = True
    balance_edges: bool = True
    imbalance: float = 1.05
    vertex_weights: VertexWeights = VertexWeights.none
    rebalance: bool = True
    method: Method = Method.kway


@register("partitioner", "random")
@dataclass
class RandomConfig:
    """``partitioner=random``'s options."""

    _target_: str = "gnnscale.partition.random.RandomPartitioner"
    seed: int = 0


@register("partitioner", "range")
@dataclass
class RangeConfig:
    """``partitioner=range``'s options."""

    _target_: str = "gnnscale.partition.range.RangePartitioner"
    seed: int = 0
    alpha: float | None = None


@register("partitioner", "ldg")
@dataclass
class LdgConfig:
    """``partitioner=ldg``'s options."""

    _target_: str = "gnnscale.partition.ldg.LdgPartitioner"
    seed: int = 0
    imbalance: float = 1.05
    order: str = "natural"


@register("partitioner", "fennel")
@dataclass
class FennelConfig:
    """``partitioner=fennel``'s options."""

    _target_: str = "gnnscale.partition.fennel.FennelPartitioner"
    seed: int = 0
    imbalance: float = 1.1
    gamma: float = 1.5
    alpha: float | None = None
    order: str = "natural"


@dataclass
class VertexCutConfig:
    """Options every vertex-cut partitioner takes: its seed and where masters come from."""

    _target_: str = ""
    seed: int = 0
    masters: str = "blocked"


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
