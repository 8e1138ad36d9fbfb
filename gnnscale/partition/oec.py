"""``oec``: outgoing edge-cut (CuSP/DeepGalois): edge ``(u, v)`` goes to ``u``'s master part.

Masters are contiguous id blocks balancing vertices and edges. A part then holds all the
out-edges of its masters; a vertex has mirrors wherever one of its in-neighbours is mastered.
"""

from __future__ import annotations

from dataclasses import dataclass

from gnnscale.data.graph import GraphStore
from gnnscale.partition._graph import blocked_masters, edge_src
from gnnscale.partition.base import Partitioner
from gnnscale.registry import register


@register("partitioner", "oec")
@dataclass
class OecConfig:
    _target_: str = "gnnscale.partition.oec.OecPartitioner"
    seed: int = 0


class OecPartitioner(Partitioner):
    """Every edge with its source's master."""

    kind = "vertex_cut"

    def assign(self, graph: GraphStore, num_parts: int, vertex_weight=None):
        master = blocked_masters(graph, num_parts)
        return master, master[edge_src(graph)]
