"""``metis``: multilevel k-way edge-cut through pymetis, with DistDGL-style balance constraints.

The graph is symmetrised with self loops and duplicates dropped (isolated vertices are fine).
Constraints, one METIS vertex-weight column each: vertices (or, with
``vertex_weights=sample_frequency``, how often each vertex is sampled, as GSplit weights METIS),
training vertices and edges (in-degree: the edges a part aggregates). ``imbalance`` is the
allowed max/mean load (pymetis ``ufactor = 1000 * (imbalance - 1)``); as METIS treats several
constraints as targets, ``rebalance`` then moves boundary vertices until every cap holds.
``method``: ``kway`` (multilevel k-way, as DistDGL) or ``recursive`` bisection.

On a typed graph the vertex column is one column per node type (the vertex weight where the
vertex is of that type, else 0: DistDGL's ``balance_ntypes``), so METIS (pymetis takes
``ncon = len(vweights) / N`` constraints) and then ``rebalance`` hold every type's balance, not
only the total; the training and edge columns stay whole-graph. ``rebalance`` runs relaxed there
(a part over one type's cap still takes vertices of the other types; a stuck part lets the
others shed first). An untyped graph is the one-type case (one vertex column, the strict
rebalance, as before).

METIS holds the whole graph (the symmetrised CSR and its coarsened copies) in memory: its
peak above the graph itself was measured at 66-88 bytes per stored edge (pymetis, random graphs
of 1-4M edges, docs/components/partitioning.md), so :func:`peak_estimate` takes
:data:`BYTES_PER_EDGE` a stored edge plus :data:`BYTES_PER_NODE` a vertex, and a graph whose
estimate exceeds the memory available (``MemAvailable``) is refused before METIS starts,
naming the streaming partitioners (``ldg``, ``fennel``: memory independent of the edges).
"""

from __future__ import annotations

import numpy as np
import pymetis
import torch

from gnnscale.data.graph import GraphStore
from gnnscale.errors import ConfigError
from gnnscale.host import meminfo
from gnnscale.partition._graph import node_type_index, undirected_csr
from gnnscale.partition._rebalance import rebalance
from gnnscale.partition.base import Partitioner
from gnnscale.partition.schemas import MetisConfig

#: METIS's measured peak per stored edge, rounded up (see the module docstring)
BYTES_PER_EDGE = 88
#: per vertex: xadj, the weights, the part array and METIS's own per-vertex arrays
BYTES_PER_NODE = 64


def peak_estimate(num_nodes: int, num_edges: int) -> int:
    """Bytes METIS needs beyond the graph to partition ``num_nodes`` / ``num_edges``."""
    return BYTES_PER_EDGE * num_edges + BYTES_PER_NODE * num_nodes


def available_memory() -> int | None:
    """``MemAvailable`` of this host in bytes (None where /proc/meminfo cannot tell)."""
    return meminfo("MemAvailable").get("MemAvailable")


def check_memory(graph: GraphStore) -> None:
    """Refuse, before METIS starts, a graph whose estimated peak exceeds the memory
    available, in one line naming the streaming partitioners."""
    need, have = peak_estimate(graph.num_nodes, graph.num_edges), available_memory()
    if have is not None and need > have:
        raise ConfigError(
            f"partitioner=metis needs about {need / 2**30:.1f} GiB for {graph.name} "
            f"({graph.num_nodes:,} vertices, {graph.num_edges:,} edges at {BYTES_PER_EDGE} "
            f"bytes an edge + {BYTES_PER_NODE} a vertex) but {have / 2**30:.1f} GiB is "
            "available: use partitioner=ldg or partitioner=fennel (streaming, memory "
            "independent of the edge count)")


class MetisPartitioner(Partitioner):
    """METIS k-way partition under up to three kinds of balance constraint (vertices, per node
    type on a typed graph; training vertices; edges)."""

    def __init__(
        self, seed: int = 0, balance_vertices: bool = True, balance_train: bool = True,
        balance_edges: bool = True, imbalance: float = 1.05, vertex_weights: str = "none",
        rebalance: bool = True, method: str = "kway",
    ) -> None:
        super().__init__(seed)
        MetisConfig.checked(imbalance, vertex_weights, method)
        self.balance_vertices, self.balance_train = balance_vertices, balance_train
        self.balance_edges, self.imbalance = balance_edges, float(imbalance)
        self.vertex_weights, self.rebalance, self.method = vertex_weights, rebalance, method

    def constraints(self, graph: GraphStore, vertex_weight: torch.Tensor | None) -> np.ndarray:
        """``[N, C]`` int64 METIS vertex weights (C >= 1; all-zero columns dropped): the vertex
        column (one per node type on a typed graph), then training vertices, then edges."""
        n, cols, vert = graph.num_nodes, [], None
        if self.vertex_weights == "sample_frequency":
            if vertex_weight is None:
                raise ValueError("partitioner.vertex_weights=sample_frequency needs the per-vertex "
                                 "sampling frequency: partition(graph, p, vertex_weight=freq)")
            f = torch.as_tensor(vertex_weight).double().clamp(min=0).numpy()
            mean = f.mean() if f.mean() > 0 else 1.0
            vert = np.rint(f / mean * 100).astype(np.int64)
        elif self.balance_vertices:
            vert = np.ones(n, dtype=np.int64)
        if vert is not None:
            ntype = node_type_index(graph)
            if ntype is None:
                cols.append(vert)
            else:
                cols += [np.where(ntype == t, vert, 0) for t in range(len(graph.node_types))]
        if self.balance_train and graph.train_idx is not None:
            cols.append(graph.mask("train").numpy().astype(np.int64))
        if self.balance_edges:
            cols.append(graph.in_degree().numpy().astype(np.int64))
        cols = [c for c in cols if c.sum() > 0] or [np.ones(n, dtype=np.int64)]
        return np.stack(cols, 1)

    def assign(self, graph: GraphStore, num_parts: int,
               vertex_weight: torch.Tensor | None = None,
               weights: np.ndarray | None = None) -> torch.Tensor:
        """``weights``: explicit int64 METIS vertex weights (``[N]`` or ``[N, C]``) in place of
        the configured constraints (offload balances its chunks by whole-graph in-degree)."""
        check_memory(graph)
        if weights is None:
            weights = self.constraints(graph, vertex_weight)
        weights = np.asarray(weights, dtype=np.int64).reshape(graph.num_nodes, -1)
        xadj, adjncy = undirected_csr(graph)
        opts = pymetis.Options(seed=self.seed, ufactor=max(1, round(1000 * (self.imbalance - 1))))
        res = pymetis.part_graph(
            num_parts, adjacency=pymetis.CSRAdjacency(adj_starts=xadj, adjacent=adjncy),
            vweights=weights.reshape(-1), recursive=self.method == "recursive", options=opts,
        )
        part = np.asarray(res.vertex_part, dtype=np.int64)
        if self.rebalance and num_parts > 1:
            part, _ = rebalance(
                part, weights.astype(np.float64), xadj, adjncy, num_parts, self.imbalance,
                relaxed=len(graph.node_types) > 1)
        return torch.from_numpy(part)
