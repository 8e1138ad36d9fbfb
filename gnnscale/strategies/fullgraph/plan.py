"""How one rank runs the full-graph forward over its part: the seam between the ``fullgraph``
strategy and the ways of handling cross-part dependencies.

An edge-cut plan (DepCache, DepComm or the hybrid of both, NeutronStar) and a vertex-cut plan
(master/mirror reduce and broadcast, DeepGalois/Gluon) each implement :class:`FullGraphPlan`;
the strategy builds one at set-up and calls :meth:`FullGraphPlan.forward` once per epoch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from gnnscale.models.base import GNN


class FullGraphPlan(ABC):
    """This rank's share of a full-graph forward pass (built once, run every epoch)."""

    #: Global ids of the vertices this rank is master of, sorted ascending.
    masters: torch.Tensor

    @abstractmethod
    def forward(self, model: GNN) -> torch.Tensor:
        """Output rows of this rank's masters (``masters`` order), differentiable with respect
        to the model's parameters; collective: every rank of the plan calls it together, and
        backward is collective too."""

    @abstractmethod
    def stats(self) -> dict[str, float]:
        """Per-epoch figures of this rank since the last call (bytes sent forward/backward,
        edges and vertex updates computed, replicated rows, ...); resets them."""
