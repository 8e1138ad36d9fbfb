"""``hvc``: hybrid vertex-cut (PowerLyra, as in CuSP): low in-degree destinations keep their
in-edges together (with the destination's master); the in-edges of a destination with
in-degree above ``threshold`` are cut by source (each goes to its source's master).
"""

from __future__ import annotations

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.partition._graph import edge_src
from gnnscale.partition._vertex_cut import VertexCutPartitioner
from gnnscale.partition.schemas import HvcConfig


class HvcPartitioner(VertexCutPartitioner):
    """IEC for low-degree destinations, OEC for high-degree ones."""

    def __init__(self, seed: int = 0, masters: str = "blocked", threshold: int = 100) -> None:
        super().__init__(seed, masters)
        HvcConfig(masters=masters, threshold=threshold).check()
        self.threshold = int(threshold)

    def assign(self, graph: GraphStore, num_parts: int,
               vertex_weight: torch.Tensor | None = None):
        """The part of every vertex (an edge-cut assignment, or the vertex-cut's masters)."""
        master = self.master_parts(graph, num_parts, vertex_weight)
        indeg = graph.in_degree()
        by_dst = torch.repeat_interleave(master, indeg)
        high = torch.repeat_interleave(indeg > self.threshold, indeg)
        return master, torch.where(high, master[edge_src(graph)], by_dst)
