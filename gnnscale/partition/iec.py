"""``iec``: incoming edge-cut (CuSP/DeepGalois): edge ``(u, v)`` goes to ``v``'s master part.

Masters come from ``masters`` (contiguous id blocks by default, or an edge-cut).
A part holds all the in-edges of its masters (the pull layout of an edge-cut); mirrors are the
remote sources.
"""

from __future__ import annotations

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.partition._vertex_cut import VertexCutPartitioner


class IecPartitioner(VertexCutPartitioner):
    """Every edge with its destination's master."""

    def assign(self, graph: GraphStore, num_parts: int,
               vertex_weight: torch.Tensor | None = None):
        """The part of every vertex (an edge-cut assignment, or the vertex-cut's masters)."""
        master = self.master_parts(graph, num_parts, vertex_weight)
        return master, torch.repeat_interleave(master, graph.in_degree())
