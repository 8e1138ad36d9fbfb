"""One-pass streaming assignment shared by ``ldg`` and ``fennel``.

Vertices arrive one at a time with their in-neighbour list (a CSC row: for graphs stored in
both directions that is the whole neighbourhood); the state is only the vertex -> part array
and the part loads, so memory stays ``O(N + P)`` beyond the graph itself.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from gnnscale.data.graph import GraphStore
from gnnscale.partition.schemas import STREAM_ORDERS


def stream_order(n: int, order: str, seed: int) -> np.ndarray:
    if order not in STREAM_ORDERS:
        raise ValueError(f"partitioner.order must be one of {STREAM_ORDERS}, got {order!r}")
    if order == "natural":
        return np.arange(n)
    return np.random.default_rng(seed).permutation(n)


def stream_assign(
    graph: GraphStore, num_parts: int, capacity: float, order: np.ndarray,
    factors: Callable[[float], tuple[float, float]],
) -> torch.Tensor:
    """Assign vertices in ``order`` to ``argmax_i counts_i * mul_i + add_i`` where ``counts_i``
    is the number of neighbours already in part ``i`` and ``(mul_i, add_i) = factors(load_i)``;
    full parts are excluded and ties go to the lighter part. Only the chosen part's factors
    change per step, so each vertex costs a handful of small array operations."""
    indptr = graph.indptr.numpy()
    indices = graph.indices.numpy()
    part1 = np.zeros(graph.num_nodes, dtype=np.int64)  # part + 1; 0 = not yet assigned
    loads = [0] * num_parts
    tie = 1e-9 / max(capacity, 1.0)
    mul = np.empty(num_parts)
    add = np.empty(num_parts)
    m0, a0 = factors(0.0)
    mul[:], add[:] = m0, a0
    size = num_parts + 1
    for v in order.tolist():
        counts = np.bincount(part1[indices[indptr[v]:indptr[v + 1]]], minlength=size)[1:]
        q = int((counts * mul + add).argmax())
        part1[v] = q + 1
        load = loads[q] = loads[q] + 1
        if load >= capacity:
            mul[q], add[q] = 0.0, -np.inf
        else:
            m, a = factors(float(load))
            mul[q], add[q] = m, a - tie * load
    return torch.from_numpy(part1 - 1)
