"""One-pass streaming assignment shared by ``ldg`` and ``fennel``.

Vertices arrive one at a time with their in-neighbour list (a CSC row: for graphs stored in
both directions that is the whole neighbourhood); the state is only the vertex -> part array
and the part loads, so memory stays ``O(N + P)`` beyond the graph itself. On a typed graph a
part's load and capacity are kept per node type (``O(N + T P)``): a vertex of type ``t`` goes
only to a part with room for type ``t``, and its load penalty is the part's load of type ``t``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from gnnscale.data.graph import GraphStore
from gnnscale.partition._graph import node_type_index, type_offsets
from gnnscale.partition.schemas import STREAM_ORDERS


def stream_order(n: int, order: str, seed: int) -> np.ndarray:
    if order not in STREAM_ORDERS:
        raise ValueError(f"partitioner.order must be one of {STREAM_ORDERS}, got {order!r}")
    if order == "natural":
        return np.arange(n)
    return np.random.default_rng(seed).permutation(n)


def type_capacities(graph: GraphStore, num_parts: int, imbalance: float) -> list[int]:
    """Per node type, the most vertices of that type a part may own: ``imbalance`` times the
    type's mean, at least its ceiling (one entry, for the whole graph, with one type)."""
    sizes = np.diff(type_offsets(graph)).tolist()
    return [max(math.ceil(imbalance * n / num_parts), math.ceil(n / num_parts)) for n in sizes]


def stream_assign(
    graph: GraphStore, num_parts: int, capacity: Sequence[float], order: np.ndarray,
    factors: Callable[[int, float], tuple[float, float]],
) -> torch.Tensor:
    """Assign vertices in ``order`` to ``argmax_i counts_i * mul_i + add_i`` where ``counts_i``
    is the number of neighbours already in part ``i`` and ``(mul_i, add_i) = factors(t,
    load_i)`` for the vertex's node type ``t`` and the part's load of that type; parts full
    for the type (``capacity[t]``) are excluded and ties go to the lighter part. Only the chosen
    part's factors change per step, so each vertex costs a handful of small array operations.
    An untyped graph is the one-type case (one capacity, loads are vertex counts)."""
    indptr = graph.indptr.numpy()
    indices = graph.indices.numpy()
    ntype = node_type_index(graph)
    types = len(capacity)
    if types != len(graph.node_types):
        raise ValueError(f"stream_assign needs one capacity per node type ({types} given for "
                         f"{len(graph.node_types)} types)")
    part1 = np.zeros(graph.num_nodes, dtype=np.int64)  # part + 1; 0 = not yet assigned
    loads = [[0] * num_parts for _ in range(types)]
    ties = [1e-9 / max(c, 1.0) for c in capacity]
    muls, adds = [np.empty(num_parts) for _ in range(types)], [np.empty(num_parts) for _ in
                                                                 range(types)]
    for t in range(types):
        m0, a0 = factors(t, 0.0)
        muls[t][:], adds[t][:] = m0, a0
    size = num_parts + 1
    t = 0  # the current vertex's type: its row of factors, loads, capacity and tie-break
    mul, add, load_t, cap, tie = muls[0], adds[0], loads[0], capacity[0], ties[0]
    for v in order.tolist():
        if ntype is not None and ntype[v] != t:
            t = int(ntype[v])
            mul, add, load_t, cap, tie = muls[t], adds[t], loads[t], capacity[t], ties[t]
        counts = np.bincount(part1[indices[indptr[v]:indptr[v + 1]]], minlength=size)[1:]
        q = int((counts * mul + add).argmax())
        part1[v] = q + 1
        load = load_t[q] = load_t[q] + 1
        if load >= cap:
            mul[q], add[q] = 0.0, -np.inf
        else:
            m, a = factors(t, float(load))
            mul[q], add[q] = m, a - tie * load
    return torch.from_numpy(part1 - 1)
