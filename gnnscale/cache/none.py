"""``cache=none``: no device cache; every row comes from the host (or, with partitioned
placement, nothing is cached anywhere either)."""

from __future__ import annotations

from typing import Any

import torch

from gnnscale.cache.base import CachePolicy
from gnnscale.data.graph import GraphStore


class NoCache(CachePolicy):
    """Caches nothing, whatever the budget says."""

    name = "none"

    def capacity(self, num_nodes: int, row_bytes: int, **kwargs: Any) -> int:
        """Always 0, whatever the budget."""
        return 0

    def hotness(self, graph: GraphStore, **kwargs: Any) -> torch.Tensor:
        """All zeros: no vertex is hotter than another."""
        return torch.zeros(graph.num_nodes, dtype=torch.float64)
