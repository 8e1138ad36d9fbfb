"""``ldg``: Linear Deterministic Greedy streaming partitioning (Stanton & Kliot, KDD 2012).

One pass: vertex ``v`` joins the part maximising ``|N(v) ∩ P_i| * (1 - |P_i| / C)`` with
capacity ``C = imbalance * N / p``; ties go to the lighter part. For graphs too large for METIS.
"""

from __future__ import annotations

import math

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.partition._stream import stream_assign, stream_order
from gnnscale.partition.base import Partitioner
from gnnscale.partition.schemas import LdgConfig


class LdgPartitioner(Partitioner):
    """Streaming greedy with a multiplicative load penalty and a hard capacity."""

    def __init__(self, seed: int = 0, imbalance: float = 1.05, order: str = "natural") -> None:
        super().__init__(seed)
        LdgConfig(imbalance=imbalance, order=order).check()
        self.imbalance, self.order = float(imbalance), order

    def assign(self, graph: GraphStore, num_parts: int, vertex_weight=None) -> torch.Tensor:
        """The part of every vertex (an edge-cut assignment, or the vertex-cut's masters)."""
        n = graph.num_nodes
        cap = max(math.ceil(self.imbalance * n / num_parts), math.ceil(n / num_parts))
        return stream_assign(graph, num_parts, cap, stream_order(n, self.order, self.seed),
                             lambda load: (1.0 - load / cap, 0.0))
