"""DepComm: communicate every remote dependency (its owner computes it and sends it)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnscale.deps.base import DependencyManager
from gnnscale.registry import register


@register("deps", "depcomm")
@dataclass
class DepCommConfig:
    _target_: str = "gnnscale.deps.depcomm.DepComm"


class DepComm(DependencyManager):
    replicates_none = True

    def plan(self, recompute_cost: torch.Tensor, comm_cost: torch.Tensor,
             mem_bytes: torch.Tensor | None = None, budget: int | None = None) -> torch.Tensor:
        return torch.zeros_like(torch.as_tensor(recompute_cost), dtype=torch.bool)

    def budget_bytes(self) -> int:
        return 0
