"""``cache=none``: no device cache; every row comes from the host (or, with partitioned
placement, nothing is cached anywhere either)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnscale.cache.base import CacheConfig, CachePolicy
from gnnscale.registry import register


@register("cache", "none")
@dataclass
class NoCacheConfig(CacheConfig):
    """``cache=none``'s options."""

    _target_: str = "gnnscale.cache.none.NoCache"


class NoCache(CachePolicy):
    """Caches nothing, whatever the budget says."""

    name = "none"

    def capacity(self, num_nodes: int, row_bytes: int, **kwargs) -> int:
        """Always 0, whatever the budget."""
        return 0

    def hotness(self, graph, **kwargs) -> torch.Tensor:
        """All zeros: no vertex is hotter than another."""
        return torch.zeros(graph.num_nodes, dtype=torch.float64)
