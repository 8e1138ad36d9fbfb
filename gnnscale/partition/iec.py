"""``iec``: incoming edge-cut (CuSP/DeepGalois): edge ``(u, v)`` goes to ``v``'s master part.

Masters are contiguous id blocks balancing vertices and edges. A part holds all the in-edges of
its masters (the pull layout of an edge-cut); mirrors are the remote sources.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.partition._graph import blocked_masters
from gnnscale.partition.base import Partitioner
from gnnscale.registry import register


@register("partitioner", "iec")
@dataclass
class IecConfig:
    _target_: str = "gnnscale.partition.iec.IecPartitioner"
    seed: int = 0


class IecPartitioner(Partitioner):
    """Every edge with its destination's master."""

    kind = "vertex_cut"

    def assign(self, graph: GraphStore, num_parts: int, vertex_weight=None):
        master = blocked_masters(graph, num_parts)
        return master, torch.repeat_interleave(master, graph.in_degree())
