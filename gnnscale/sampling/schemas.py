"""Typed schemas of the ``sampler`` options (torch-free: the launcher composes and checks a
config with these alone; each ``_target_`` names the implementation a rank builds, whose
constructor runs the same :meth:`check`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.schema import Options, require_at_least


@dataclass
class SamplerConfig(Options):
    """Base of the sampler options; :attr:`weighted_blocks`: its blocks carry ``edge_weight``
    (strategies and models check they can use it)."""

    weighted_blocks: ClassVar[bool] = False
    _target_: str = ""


@register("sampler", "neighbor")
@dataclass
class NeighborSamplerConfig(SamplerConfig):
    """``sampler=neighbor``: per-layer fanouts, target layer first; -1 = all neighbors;
    ``threads``: native sampling threads, 0 = automatic; ``with_edge_ids``: blocks carry their
    edges' global ids on every graph, not only on graphs with edge types (see
    ``NeighborSampler``)."""

    _target_: str = "gnnscale.sampling.neighbor.NeighborSampler"
    fanouts: list[int] = field(default_factory=lambda: [15, 10, 5])
    replace: bool = False
    weighted: bool = False
    threads: int = 0
    with_edge_ids: bool = False

    def check(self) -> None:
        """At least one fanout, each -1 or >= 0; threads >= 0."""
        fanouts = [int(f) for f in self.fanouts]
        if not fanouts:
            raise ConfigError("sampler.fanouts is empty: give one fanout per layer, "
                              "e.g. [15, 10, 5]")
        if any(f < -1 for f in fanouts):
            raise ConfigError(f"sampler.fanouts must be -1 (all neighbors) or >= 0, "
                              f"got {fanouts}")
        require_at_least("sampler.threads", int(self.threads), 0, " (0: automatic)")


@dataclass
class HopsSamplerConfig(SamplerConfig):
    """Base of the samplers that draw ``num_layers`` hops instead of per-layer fanouts (the
    strategies check it against ``model.num_layers``)."""

    num_layers: int = 3

    def check(self) -> None:
        """At least one hop."""
        require_at_least("sampler.num_layers", int(self.num_layers), 1)


@register("sampler", "full")
@dataclass
class FullNeighborSamplerConfig(HopsSamplerConfig):
    """``sampler=full``: whole in-neighborhoods, ``num_layers`` hops; ``with_edge_ids`` as
    ``sampler=neighbor``'s."""

    _target_: str = "gnnscale.sampling.full.FullNeighborSampler"
    with_edge_ids: bool = False


@register("sampler", "random_walk")
@dataclass
class RandomWalkSamplerConfig(HopsSamplerConfig):
    """``sampler=random_walk``: PinSAGE's neighbourhoods (FGNN: 4 walks of length 3, top 5)."""

    weighted_blocks: ClassVar[bool] = True
    _target_: str = "gnnscale.sampling.random_walk.RandomWalkSampler"
    num_walks: int = 4
    walk_length: int = 3
    top_k: int = 5
    threads: int = 0

    def check(self) -> None:
        """At least one hop; walks, walk length and top-k >= 1; threads >= 0."""
        super().check()
        for key in ("num_walks", "walk_length", "top_k"):
            require_at_least(f"sampler.{key}", int(getattr(self, key)), 1)
        require_at_least("sampler.threads", int(self.threads), 0, " (0: automatic)")
