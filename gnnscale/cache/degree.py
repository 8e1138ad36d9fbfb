"""``cache=degree``: hotness = out-degree, how many destinations a vertex feeds (PaGraph)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnscale.cache.base import CachePolicy
from gnnscale.registry import register


@register("cache", "degree")
@dataclass
class DegreeCacheConfig:
    _target_: str = "gnnscale.cache.degree.DegreePolicy"
    ratio: float = 0.0
    bytes: int | None = None
    placement: str = "replicated"
    auto: bool = False
    reserve: float = 0.05


class DegreePolicy(CachePolicy):
    """Caches the vertices with the most out-edges; ignores sampler and training set."""

    name = "degree"

    def hotness(self, graph, **kwargs) -> torch.Tensor:
        return graph.out_degree().to(torch.float64)
