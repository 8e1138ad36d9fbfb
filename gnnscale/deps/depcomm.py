"""DepComm: communicate every remote dependency (its owner computes it and sends it)."""

from __future__ import annotations

import torch

from gnnscale.deps.base import DependencyManager
from gnnscale.deps.schemas import DepCommConfig


class DepComm(DependencyManager):
    """Communicates every remote dependency: its owner computes it and sends it."""

    replicates_none = DepCommConfig.replicates_none

    def plan(self, recompute_cost: torch.Tensor, comm_cost: torch.Tensor,
             mem_bytes: torch.Tensor | None = None, budget: int | None = None) -> torch.Tensor:
        """All False: every candidate is communicated."""
        return torch.zeros_like(torch.as_tensor(recompute_cost), dtype=torch.bool)

    def budget_bytes(self) -> int:
        """0: nothing is replicated."""
        return 0
