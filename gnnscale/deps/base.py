"""Dependency managers: for each remote input a rank needs, replicate it or communicate it.

*Replicate* (DepCache) means the rank holds or loads the dependency's inputs and recomputes
it; *communicate* (DepComm) means the owner computes it and sends it. Both strategies that
have remote dependencies plan through this one interface:

- :meth:`DependencyManager.prepare` (collective, once) fixes the per-dimension costs;
- :meth:`DependencyManager.layer_costs` turns them into per-layer figures (row sent, edge and
  vertex computed) for a model's row widths;
- :meth:`DependencyManager.plan` is the greedy step: given candidates' recomputation cost,
  communication cost and memory, which to replicate (cheapest recomputation first, while it is
  cheaper than communicating and the budget holds).

``split`` calls them per sample (top-down, inside its native split with
:meth:`replication_budget` rows per step); ``fullgraph`` calls them once at set-up, layer by
layer bottom-up (:mod:`gnnscale.deps.planner`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch.distributed import ProcessGroup

from gnnscale.deps.costs import Costs, layer_costs
from gnnscale.ops.deps import hybrid_greedy


class DependencyManager(ABC):
    """Decides, per remote dependency, replicate (True) or communicate (False)."""

    #: True when every dependency is replicated (strategies that cannot communicate check it).
    replicates_all: bool = False
    #: True when no dependency is ever replicated (every remote row is communicated).
    replicates_none: bool = False
    #: Factor on the recomputation cost (NeutronStar Eq. 3's mu, 0 < mu <= 1).
    mu: float = 1.0
    #: Scales the communication cost (> 1 favours replication).
    comm_weight: float = 1.0

    def prepare(self, group: ProcessGroup | None = None, sparse: bool = True) -> Costs | None:
        """Fix the per-dimension costs (probe or config); collective over ``group``;
        ``sparse``: the model aggregates by a sparse product (else one message per edge)."""
        return None

    def layer_costs(self, dims: list[int]) -> torch.Tensor:
        """3 x (L + 1) figures for rows of widths ``dims`` (see :func:`costs.layer_costs`);
        zeros when the manager has no cost model."""
        costs = self.prepare_costs()
        if costs is None:
            return torch.zeros(3 * len(dims), dtype=torch.float64)
        return layer_costs(costs, dims, self.comm_weight)

    def replication_costs(self, dims: list[int]) -> torch.Tensor:
        """:meth:`layer_costs` with the recomputation figures (per edge, per vertex) times
        :attr:`mu` (Eq. 3), then one exchange's fixed seconds (``t_sync`` times
        ``comm_weight``): for a greedy that adds to a replica's cost the communication of
        inputs it lacks, which ``mu`` does not discount, and that may spare a layer's exchanges
        altogether (``split``'s native greedy)."""
        costs = self.layer_costs(dims).clone()
        costs[len(dims):] *= self.mu
        probed = self.prepare_costs()
        sync = 0.0 if probed is None else probed.t_sync * self.comm_weight
        return torch.cat([costs, torch.tensor([sync], dtype=torch.float64)])

    def prepare_costs(self) -> Costs | None:
        """The costs fixed by :meth:`prepare` (None without a cost model)."""
        return None

    def budget_bytes(self) -> int | None:
        """Bytes a rank may spend on replicated features, rows and edges (None: no cap)."""
        return None

    def replication_budget(self, row_bytes: int) -> int:
        """Rows a rank may replicate per sampled step (``split``)."""
        budget = self.budget_bytes()
        if budget is None:
            return 1 << 62
        return int(budget // max(row_bytes, 1))

    @abstractmethod
    def plan(self, recompute_cost: torch.Tensor, comm_cost: torch.Tensor,
             mem_bytes: torch.Tensor | None = None, budget: int | None = None) -> torch.Tensor:
        """Boolean mask over candidate dependencies: True = replicate, False = communicate.

        ``recompute_cost``/``comm_cost`` are per-candidate cost estimates (seconds);
        ``mem_bytes`` what replicating each would add; ``budget`` the bytes still free.
        """


def greedy(recompute_cost: torch.Tensor, comm_cost: torch.Tensor, mem_bytes: torch.Tensor | None,
           budget: int | None, mu: float = 1.0) -> torch.Tensor:
    """NeutronStar's greedy step (Algorithm 4, lines 8-15), in native code
    (``csrc/deps/greedy.h``, the same walk ``split_sample`` runs per sample).

    Candidates are taken in ascending ``recompute_cost`` (ties by position); one is replicated
    while ``mu * recompute_cost < comm_cost`` and the running memory stays within ``budget``.
    """
    return hybrid_greedy(recompute_cost, comm_cost, mem_bytes, budget, mu)
