"""DepCache: replicate every remote dependency (each rank loads its whole k-hop input)."""

from __future__ import annotations

import torch

from gnnscale.deps.base import DependencyManager
from gnnscale.deps.schemas import DepCacheConfig


class DepCache(DependencyManager):
    """Replicates every remote dependency: no communication, each rank its whole k-hop input."""

    replicates_all = DepCacheConfig.replicates_all

    def plan(self, recompute_cost: torch.Tensor, comm_cost: torch.Tensor,
             mem_bytes: torch.Tensor | None = None, budget: int | None = None) -> torch.Tensor:
        """All True: every candidate is replicated."""
        return torch.ones_like(torch.as_tensor(recompute_cost), dtype=torch.bool)
