"""``cvc``: 2D Cartesian vertex-cut (Boman et al. 2013; CuSP/DeepGalois).

The ``p`` parts form an ``r x c`` grid (part ``i * c + j`` at row ``i``, column ``j``); masters
come from ``masters`` (contiguous id blocks by default, or an edge-cut). Edge ``(u, v)`` goes to
the row of ``u``'s master and the column of ``v``'s master: ``(master(u) // c) * c + master(v) %
c``. A vertex is then copied only within its master's row (as a source) and column (as a
destination), so every part talks to at most ``(r - 1) + (c - 1)`` others: ``2 (sqrt(p) - 1)``
on a square grid.

``rows = None`` picks the most square factorisation of ``p``; ``require_square`` refuses
part counts that are not perfect squares.
"""

from __future__ import annotations

import math

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.partition._graph import edge_src
from gnnscale.partition._vertex_cut import VertexCutPartitioner


def grid_shape(num_parts: int, rows: int | None = None, require_square: bool = False):
    """``(r, c)`` with ``r * c == num_parts``, or a ValueError saying which counts work."""
    if require_square:
        r = math.isqrt(num_parts)
        if r * r != num_parts:
            lo, hi = r * r, (r + 1) ** 2
            raise ValueError(
                f"cvc with require_square needs a square number of parts, got {num_parts}: "
                f"use {lo} or {hi}, or set partitioner.require_square=false"
            )
        if rows is not None and rows != r:
            raise ValueError(f"cvc.rows={rows} is not square for {num_parts} parts (use {r})")
        return r, r
    if rows is None:
        rows = max(d for d in range(1, math.isqrt(num_parts) + 1) if num_parts % d == 0)
    if rows < 1 or num_parts % rows:
        divisors = [d for d in range(1, num_parts + 1) if num_parts % d == 0]
        raise ValueError(
            f"cvc.rows={rows} does not divide num_parts={num_parts} into an r x c grid: "
            f"choose rows from {divisors} (or null for the most square grid)"
        )
    return rows, num_parts // rows


class CvcPartitioner(VertexCutPartitioner):
    """Edges on the 2D block grid of the adjacency matrix."""

    def __init__(self, seed: int = 0, masters: str = "blocked", rows: int | None = None,
                 require_square: bool = False):
        super().__init__(seed, masters)
        self.rows, self.require_square = rows, require_square

    def assign(self, graph: GraphStore, num_parts: int,
               vertex_weight: torch.Tensor | None = None):
        """The part of every vertex (an edge-cut assignment, or the vertex-cut's masters)."""
        _, c = grid_shape(num_parts, self.rows, self.require_square)
        master = self.master_parts(graph, num_parts, vertex_weight)
        row_of_src = torch.div(master[edge_src(graph)], c, rounding_mode="floor")
        col_of_dst = torch.repeat_interleave(master % c, graph.in_degree())
        return master, row_of_src * c + col_of_dst
