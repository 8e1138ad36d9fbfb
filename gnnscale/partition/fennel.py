"""``fennel``: streaming partitioning of Tsourakakis et al. (WSDM 2014).

One pass: vertex ``v`` joins the part maximising ``|N(v) ∩ P_i| - alpha * gamma * |P_i|^(gamma-1)``
among parts below the capacity ``imbalance * N / p``. ``alpha = None`` uses the paper's
``sqrt(p) * m / n^gamma`` (m = undirected edges, here E / 2).

On a typed graph ``|P_i|`` and the capacity are per node type (the part's vertices of ``v``'s
type, ``imbalance * n_t / p``), and type ``t``'s ``alpha_t = alpha * (n / n_t)^(gamma - 1)``
gives every type the same marginal penalty at a balanced load as the untyped graph
(``alpha * gamma * (n / p)^(gamma - 1)``); one type is the untyped case (``alpha_t = alpha``).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from gnnscale.data.graph import GraphStore
from gnnscale.partition._graph import type_offsets
from gnnscale.partition._stream import stream_assign, stream_order, type_capacities
from gnnscale.partition.base import Partitioner
from gnnscale.partition.schemas import FennelConfig


class FennelPartitioner(Partitioner):
    """Streaming greedy with an additive, superlinear load penalty and a hard capacity."""

    def __init__(self, seed: int = 0, imbalance: float = 1.1, gamma: float = 1.5,
                 alpha: float | None = None, order: str = "natural") -> None:
        super().__init__(seed)
        FennelConfig(imbalance=imbalance, gamma=gamma, order=order).check()
        self.imbalance, self.gamma, self.alpha, self.order = float(imbalance), gamma, alpha, order

    def assign(self, graph: GraphStore, num_parts: int,
               vertex_weight: torch.Tensor | None = None) -> torch.Tensor:
        """The part of every vertex (an edge-cut assignment, or the vertex-cut's masters)."""
        n, g = graph.num_nodes, self.gamma
        m = max(graph.num_edges / 2, 1.0)
        alpha = self.alpha if self.alpha is not None else math.sqrt(num_parts) * m / n**g
        sizes = np.diff(type_offsets(graph)).tolist()
        alphas = [alpha if nt == n else alpha * (n / max(nt, 1)) ** (g - 1) for nt in sizes]
        cap = type_capacities(graph, num_parts, self.imbalance)
        return stream_assign(graph, num_parts, cap, stream_order(n, self.order, self.seed),
                             lambda t, load: (1.0, -alphas[t] * g * load ** (g - 1)))
