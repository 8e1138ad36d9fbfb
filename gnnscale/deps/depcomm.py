"""DepComm: communicate every remote dependency (its owner computes it and sends it)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnscale.deps.base import DependencyManager
from gnnscale.registry import register


@register("deps", "depcomm")
@dataclass
class DepCommConfig:
    """``deps=depcomm``'s options."""

    _target_: str = "gnnscale.deps.depcomm.DepComm"


class DepComm(DependencyManager):
    """Communicates every remote dependency: its owner computes it and sends it."""

    replicates_none = True

    def plan(self, recompute_cost: torch.Tensor, comm_cost: torch.Tensor,
             mem_bytes: torch.Tensor | None = None, budget: int | None = None) -> torch.Tensor:
        """All False: every candidate is communicated."""
        return torch.zeros_like(torch.as_tensor(recompute_cost), dtype=torch.bool)

    def budget_bytes(self) -> int:
        """0: nothing is replicated."""
        return 0
