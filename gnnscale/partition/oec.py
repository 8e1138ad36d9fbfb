"""``oec``: outgoing edge-cut (CuSP/DeepGalois): edge ``(u, v)`` goes to ``u``'s master part.

Masters come from ``masters`` (contiguous id blocks by default, or an edge-cut).
A part then holds all the
out-edges of its masters; a vertex has mirrors wherever one of its in-neighbours is mastered.
"""

from __future__ import annotations

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.partition._graph import edge_src
from gnnscale.partition._vertex_cut import VertexCutPartitioner


class OecPartitioner(VertexCutPartitioner):
    """Every edge with its source's master."""

    def assign(self, graph: GraphStore, num_parts: int,
               vertex_weight: torch.Tensor | None = None):
        """The part of every vertex (an edge-cut assignment, or the vertex-cut's masters)."""
        master = self.master_parts(graph, num_parts, vertex_weight)
        return master, master[edge_src(graph)]
