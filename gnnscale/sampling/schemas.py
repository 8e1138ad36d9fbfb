"""Typed schemas of the ``sampler`` options (torch-free: the launcher composes and checks a
config with these alone; each ``_target_`` names the implementation a rank builds)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gnnscale.registry import register


@register("sampler", "neighbor")
@dataclass
class NeighborSamplerConfig:
    """``sampler=neighbor``: per-layer fanouts, target layer first; -1 = all neighbors;
    ``threads``: native sampling threads, 0 = automatic (see ``NeighborSampler``)."""

    _target_: str = "gnnscale.sampling.neighbor.NeighborSampler"
    fanouts: list[int] = field(default_factory=lambda: [15, 10, 5])
    replace: bool = False
    weighted: bool = False
    threads: int = 0


@register("sampler", "full")
@dataclass
class FullNeighborSamplerConfig:
    """``sampler=full``: whole in-neighborhoods, ``num_layers`` hops."""

    _target_: str = "gnnscale.sampling.full.FullNeighborSampler"
    num_layers: int = 3


@register("sampler", "random_walk")
@dataclass
class RandomWalkSamplerConfig:
    """``sampler=random_walk``: PinSAGE's neighbourhoods (FGNN: 4 walks of length 3, top 5)."""

    _target_: str = "gnnscale.sampling.random_walk.RandomWalkSampler"
    num_layers: int = 3
    num_walks: int = 4
    walk_length: int = 3
    top_k: int = 5
    threads: int = 0
