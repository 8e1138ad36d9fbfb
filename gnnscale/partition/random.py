"""``random``: every vertex to a uniformly random part, vertex counts balanced exactly."""

from __future__ import annotations

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.partition.base import Partitioner


class RandomPartitioner(Partitioner):
    """A seeded random permutation dealt round-robin: parts differ in size by at most one."""

    def assign(self, graph: GraphStore, num_parts: int, vertex_weight=None) -> torch.Tensor:
        """The part of every vertex (an edge-cut assignment, or the vertex-cut's masters)."""
        gen = torch.Generator().manual_seed(self.seed)
        perm = torch.randperm(graph.num_nodes, generator=gen)
        part = torch.empty(graph.num_nodes, dtype=torch.int64)
        part[perm] = torch.arange(graph.num_nodes) % num_parts
        return part
