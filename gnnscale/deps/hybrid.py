"""Hybrid dependencies (NeutronStar): replicate a remote dependency when recomputing it is
cheaper than communicating it, by a cost model probed on this machine, under a memory cap.

The per-dimension costs (vertex update, edge, communicated float) are probed at start-up
(:func:`gnnscale.deps.costs.probe_costs`) and agreed over ranks; the greedy of NeutronStar's
Algorithm 4 (cheapest recomputation first, re-measured as inputs become present, stop at the
cap) runs inside the split (``csrc/split.cpp``) for split training.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnscale.deps.base import DependencyManager
from gnnscale.deps.costs import Costs, layer_costs, probe_costs
from gnnscale.registry import register


@register("deps", "hybrid")
@dataclass
class HybridConfig:
    _target_: str = "gnnscale.deps.hybrid.Hybrid"
    memory_cap_mb: float = 256.0  # replicated hidden rows per rank, at most
    comm_weight: float = 1.0  # scales the probed communication cost (>1 favours replication)


class Hybrid(DependencyManager):
    replicates_all = False

    def __init__(self, memory_cap_mb: float = 256.0, comm_weight: float = 1.0) -> None:
        if memory_cap_mb < 0:
            raise ValueError(f"deps.memory_cap_mb must be >= 0, got {memory_cap_mb}")
        if comm_weight <= 0:
            raise ValueError(f"deps.comm_weight must be > 0, got {comm_weight}")
        self.memory_cap_mb, self.comm_weight = memory_cap_mb, comm_weight
        self.costs: Costs | None = None

    def plan(self, recompute_cost: torch.Tensor, comm_cost: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(recompute_cost) < self.comm_weight * torch.as_tensor(comm_cost)

    def probe(self, group=None) -> Costs:
        """Measure (once) the per-dimension costs on this machine; collective."""
        if self.costs is None:
            self.costs = probe_costs(group=group)
        return self.costs

    def layer_costs(self, dims: list[int]) -> torch.Tensor:
        """Per-layer costs for the split's greedy (see :func:`layer_costs`)."""
        if self.costs is None:
            raise RuntimeError("call probe() before layer_costs()")
        return layer_costs(self.costs, dims, self.comm_weight)

    def replication_budget(self, row_bytes: int) -> int:
        """Rows a rank may replicate in one step under ``memory_cap_mb``."""
        return int(self.memory_cap_mb * 2**20 // max(row_bytes, 1))
