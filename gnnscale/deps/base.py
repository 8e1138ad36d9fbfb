"""Dependency managers: for each remote input a rank needs, replicate it or communicate it.

*Replicate* (DepCache) means the rank holds or loads the dependency's inputs and recomputes
it; *communicate* (DepComm) means the owner computes it and sends it. Strategies ask
:meth:`DependencyManager.plan` which of a set of remote dependencies to replicate.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch


class DependencyManager(ABC):
    """Decides, per remote dependency, replicate (True) or communicate (False)."""

    #: True when every dependency is replicated (strategies that cannot communicate check it).
    replicates_all: bool = False

    @abstractmethod
    def plan(self, recompute_cost: torch.Tensor, comm_cost: torch.Tensor) -> torch.Tensor:
        """Boolean mask over dependencies: True = replicate/recompute, False = communicate.

        ``recompute_cost`` and ``comm_cost`` are per-dependency cost estimates (seconds).
        """
