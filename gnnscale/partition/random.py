"""``random``: every vertex to a uniformly random part, vertex counts balanced exactly.

On a typed graph each node type is dealt on its own (one seeded permutation per type, in type
order), so every type's counts differ by at most one over the parts, and the totals too (each
type's deal continues where the previous one stopped). An untyped graph is the one-type case.
"""

from __future__ import annotations

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.partition._graph import type_offsets
from gnnscale.partition.base import Partitioner


class RandomPartitioner(Partitioner):
    """A seeded random permutation (per node type) dealt round-robin: parts differ in size by at
    most one, in every type."""

    def assign(self, graph: GraphStore, num_parts: int,
               vertex_weight: torch.Tensor | None = None) -> torch.Tensor:
        """The part of every vertex (an edge-cut assignment, or the vertex-cut's masters)."""
        gen = torch.Generator().manual_seed(self.seed)
        part = torch.empty(graph.num_nodes, dtype=torch.int64)
        off = type_offsets(graph).tolist()
        for lo, hi in zip(off[:-1], off[1:], strict=True):
            perm = torch.randperm(hi - lo, generator=gen)
            part[lo + perm] = torch.arange(lo, hi) % num_parts
        return part
