"""Hybrid dependencies (NeutronStar): replicate a remote dependency when recomputing it is
cheaper than communicating it, by the cost model of Equations 1-3, under a memory budget.

The per-dimension costs (vertex update, edge, communicated float) are probed at start-up
(:func:`gnnscale.deps.costs.probe_costs`, agreed over ranks) or fixed by ``deps.costs`` so a
plan is reproducible. ``split`` runs the greedy per sample inside its native split;
``fullgraph`` runs Algorithm 4 once, bottom-up (:mod:`gnnscale.deps.planner`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed import ProcessGroup

from gnnscale.deps.base import DependencyManager, greedy
from gnnscale.deps.costs import Costs, probe_costs
from gnnscale.deps.schemas import HybridConfig, given_costs


class Hybrid(DependencyManager):
    """NeutronStar's hybrid: replicates where recomputing is cheaper than communicating, within
    ``memory_cap_mb``."""

    replicates_all = HybridConfig.replicates_all

    def __init__(self, memory_cap_mb: float = 256.0, comm_weight: float = 1.0, mu: float = 1.0,
                 costs: Any = None, margin: float = 0.01) -> None:
        HybridConfig(memory_cap_mb=memory_cap_mb, comm_weight=comm_weight, mu=mu,
                     margin=margin).check()
        self.memory_cap_mb, self.comm_weight, self.mu = memory_cap_mb, comm_weight, mu
        #: fullgraph's guard keeps the hybrid's own plan only when it is predicted this much
        #: faster than the better fixed plan (:func:`gnnscale.deps.planner.guard`)
        self.margin = margin
        self.costs: Costs | None = None
        given = given_costs(costs)
        if given:
            self.costs = Costs(given["t_vertex"], given["t_edge"], given["t_comm"],
                               given.get("t_sync", 0.0))

    def plan(self, recompute_cost: torch.Tensor, comm_cost: torch.Tensor,
             mem_bytes: torch.Tensor | None = None, budget: int | None = None) -> torch.Tensor:
        """:func:`greedy` with this manager's ``mu`` (``comm_cost`` already carries
        ``comm_weight``)."""
        # comm_cost comes from layer_costs, which already applies comm_weight
        return greedy(recompute_cost, comm_cost, mem_bytes, budget, self.mu)

    def prepare(self, group: ProcessGroup | None = None, sparse: bool = True) -> Costs:
        """Probe (once, collectively) the per-dimension costs unless ``deps.costs`` fixed them
        (``sparse``: the edge cost of a sparse product, else of one message per edge)."""
        if self.costs is None:
            self.costs = probe_costs(group=group, sparse=sparse)
        return self.costs

    def prepare_costs(self) -> Costs:
        """The probed or configured costs; raises before :meth:`prepare`."""
        if self.costs is None:
            raise RuntimeError("call prepare() before layer_costs()")
        return self.costs

    def budget_bytes(self) -> int:
        """``memory_cap_mb`` in bytes."""
        return HybridConfig(memory_cap_mb=self.memory_cap_mb).budget_bytes()
