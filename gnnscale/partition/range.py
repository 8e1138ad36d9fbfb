"""``range``: contiguous id ranges balanced by ``alpha * vertices + edges`` (Gemini chunking).

Gemini and NeutronStar cut the id space into one chunk per part so that every chunk carries a
similar ``alpha * |V_i| + |E_i|`` (in-edges, the aggregation work). ``alpha = None`` uses
Gemini's ``8 * (p - 1)``; ``alpha = 0`` balances edges only.

On a typed graph each node type's id range is cut into ``p`` such chunks, so part ``i`` owns
one contiguous slice of every type and each type's load is balanced on its own (an untyped
graph is the one-type case: one cut of the whole id range).
"""

from __future__ import annotations

import numpy as np
import torch

from gnnscale.data.graph import GraphStore
from gnnscale.partition._graph import ranges_per_type, type_offsets
from gnnscale.partition.base import Partitioner
from gnnscale.partition.schemas import RangeConfig


class RangePartitioner(Partitioner):
    """Vertex ``v`` goes to the chunk (of its type's range) holding its id; chunk bounds
    balance vertices and edges."""

    def __init__(self, seed: int = 0, alpha: float | None = None) -> None:
        super().__init__(seed)
        RangeConfig(alpha=alpha).check()
        self.alpha = alpha

    def assign(self, graph: GraphStore, num_parts: int,
               vertex_weight: torch.Tensor | None = None) -> torch.Tensor:
        """The part of every vertex (an edge-cut assignment, or the vertex-cut's masters)."""
        alpha = 8.0 * (num_parts - 1) if self.alpha is None else float(self.alpha)
        w = graph.in_degree().numpy().astype(np.float64) + alpha
        return torch.from_numpy(ranges_per_type(w, num_parts, type_offsets(graph)))
