"""``cache=degree``: hotness = out-degree, how many destinations a vertex feeds (PaGraph)."""

from __future__ import annotations

from typing import Any

import torch

from gnnscale.cache.base import CachePolicy
from gnnscale.data.graph import GraphStore


class DegreePolicy(CachePolicy):
    """Caches the vertices with the most out-edges; ignores sampler and training set."""

    name = "degree"

    def hotness(self, graph: GraphStore, **kwargs: Any) -> torch.Tensor:
        """Out-degree of every vertex (schedule, sampler and seed unused)."""
        return graph.out_degree().to(torch.float64)
