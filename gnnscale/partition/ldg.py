"""``ldg``: Linear Deterministic Greedy streaming partitioning (Stanton & Kliot, KDD 2012).

One pass: vertex ``v`` joins the part maximising ``|N(v) ∩ P_i| * (1 - |P_i| / C)`` with
capacity ``C = imbalance * N / p``; ties go to the lighter part. For graphs too large for METIS.
On a typed graph ``|P_i|`` and ``C`` are per node type (the part's vertices of ``v``'s type,
``imbalance * N_t / p``), so every type is balanced on its own.
"""

from __future__ import annotations

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.partition._stream import stream_assign, stream_order, type_capacities
from gnnscale.partition.base import Partitioner
from gnnscale.partition.schemas import LdgConfig


class LdgPartitioner(Partitioner):
    """Streaming greedy with a multiplicative load penalty and a hard capacity."""

    def __init__(self, seed: int = 0, imbalance: float = 1.05, order: str = "natural") -> None:
        super().__init__(seed)
        LdgConfig(imbalance=imbalance, order=order).check()
        self.imbalance, self.order = float(imbalance), order

    def assign(self, graph: GraphStore, num_parts: int,
               vertex_weight: torch.Tensor | None = None) -> torch.Tensor:
        """The part of every vertex (an edge-cut assignment, or the vertex-cut's masters)."""
        cap = type_capacities(graph, num_parts, self.imbalance)
        return stream_assign(graph, num_parts, cap,
                             stream_order(graph.num_nodes, self.order, self.seed),
                             lambda t, load: (1.0 - load / cap[t], 0.0))
