"""Multi-hop neighbor sampling (uniform or edge-weighted, with or without replacement), with a
fanout per edge type on typed graphs."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.ops.sampling import TypedRuns, sample_neighbors, typed_runs
from gnnscale.sampling.base import Block, MiniBatch, Sampler
from gnnscale.sampling.schemas import NeighborSamplerConfig, fanout_layers, fanout_table, is_typed


def threads_for(threads: int) -> int:
    """Threads of a sampler's next call: ``threads`` when set (> 0); else all of torch's
    intra-op threads on the main thread (inline sampling: compute waits for the batch, as in a
    sampler worker process, whose main thread has its own thread budget), and 1 on any other
    thread (a prefetch thread sampling while the same process computes on its intra-op
    threads)."""
    if threads > 0:
        return threads
    if threading.current_thread() is threading.main_thread():
        return torch.get_num_threads()
    return 1


class NeighborSampler(Sampler):
    """Draws ``fanouts[l]`` in-neighbors per vertex per hop, target hop first (as PyG's
    ``num_neighbors``); ``-1`` takes every in-neighbor.

    Every hop samples for all vertices sampled so far, so each block's destinations are the
    first ``n_dst`` of its sources. ``replace`` draws with replacement; ``weighted`` draws in
    proportion to ``graph.edge_weight`` (zero-weight edges are never drawn, except by a fanout
    of -1, which takes every edge). The sample is a function of ``seed``, the seeds and the
    graph only, whatever the number of threads: each vertex's draw in hop ``h`` is keyed by
    ``(seed, h, vertex id)``.

    Typed graphs (``graph.type_per_edge`` set) sample per edge type: each vertex draws, from
    its in-edges of each type ``t``, that type's fanout in the layer (a number gives every
    type the same; a dict ``{relation or src__rel__dst: fanout}`` one per type, see
    ``sampling/schemas.py``; -1: all of that type, 0: none), independently per type, keyed
    by ``(seed, h, vertex id, t)``. Dicts on a graph without edge types name its one type.
    The first typed sample of a graph builds its run table (``O(E)``, once; int32, one entry
    per vertex and edge type entering its node type); fanouts of -1 everywhere (every
    in-edge, as ``FullNeighborSampler`` and evaluation draw) need none: the untyped kernel
    takes the same edges in the same order.

    ``threads`` > 0 fixes the native sampler's thread count; 0 (the default) picks it per call
    (:meth:`threads_for_call`) so that sampling never competes with the process's compute.

    Blocks carry their edges' global ids (``e_id``) when ``with_edge_ids`` is set (a consumer
    of edge features asks) or the graph has edge types (``graph.type_per_edge`` not None; the
    blocks then carry ``edge_type`` too); otherwise ``e_id`` is None, which spares the native
    sampler a write and the queues that ship the blocks a third of their edge bytes. The
    edge ids change nothing else: the same ``seed`` gives the same sample either way.
    """

    def __init__(self, fanouts: Sequence[int | Mapping[str, int]] | Mapping[str, list[int]],
                 replace: bool = False, weighted: bool = False, threads: int = 0,
                 with_edge_ids: bool = False):
        NeighborSamplerConfig(fanouts=fanouts, threads=threads).check()
        layers = fanout_layers(fanouts)
        self.typed_fanouts = is_typed(fanouts)
        self.fanouts = layers
        self.replace, self.weighted = bool(replace), bool(weighted)
        self.threads = int(threads)
        self.with_edge_ids = bool(with_edge_ids)
        self.num_layers = len(layers)
        self._tables: dict[tuple, list[list[int]]] = {}
        self._runs: tuple[torch.Tensor, TypedRuns] | None = None

    def __getstate__(self) -> dict:
        """Pickled (to sampler workers) without the per-graph caches."""
        return {**self.__dict__, "_tables": {}, "_runs": None}

    def typed_runs(self, graph: GraphStore) -> TypedRuns:
        """The run table of ``graph``'s edge types (:func:`~gnnscale.ops.sampling.typed_runs`),
        built on first use and kept while the graph's ``type_per_edge`` is the same tensor."""
        tpe = graph.type_per_edge
        if tpe is None:
            raise ValueError(f"{graph.name} has one edge type: no per-type runs to sample")
        if self._runs is None or self._runs[0] is not tpe:
            dst = [graph.node_types.index(et[2]) for et in graph.edge_types]
            self._runs = (tpe, typed_runs(graph.indptr, tpe, graph.node_type_offset, dst))
        return self._runs[1]

    def fanout_table(self, edge_types: Any) -> list[list[int]]:
        """``[layer][edge type]`` fanouts for a graph with ``edge_types`` (in its order);
        raises ``ConfigError`` when a dict of fanouts does not name exactly its types."""
        key = tuple(tuple(et) for et in edge_types)
        if key not in self._tables:
            self._tables[key] = fanout_table(self.fanouts, key)
        return self._tables[key]

    def threads_for_call(self) -> int:
        """Threads of the next :meth:`sample` (:func:`threads_for` of ``threads``)."""
        return threads_for(self.threads)

    def sample(self, graph: GraphStore, seeds: torch.Tensor, seed: int = 0) -> MiniBatch:
        """The ``fanouts`` hops in the native sampler (``weighted``: by ``graph.edge_weight``;
        per edge type on a typed graph)."""
        weights = None
        if self.weighted:
            if graph.edge_weight is None:
                raise ValueError(f"sampler.weighted=true but graph {graph.name!r} has no "
                                 "edge_weight; set sampler.weighted=false or add weights")
            weights = graph.edge_weight
            if weights.dtype != torch.float32:
                weights = weights.float()
        seeds = torch.as_tensor(seeds).reshape(-1)
        if seeds.is_floating_point() or seeds.dtype == torch.bool:
            raise TypeError(f"seeds must hold integer vertex ids, got {seeds.dtype}")
        types = getattr(graph, "type_per_edge", None)
        fanouts: Sequence[int] | Sequence[Sequence[int]]
        typed = None
        if types is not None or self.typed_fanouts:
            table = self.fanout_table(graph.edge_types)
            if all(f == -1 for row in table for f in row):  # every in-edge: the same either way
                fanouts = [-1] * len(table)
            elif types is not None:
                fanouts, typed = table, self.typed_runs(graph)
            else:
                fanouts = [row[0] for row in table]
        else:  # no dict among the layers (is_typed): one fanout a layer
            fanouts = [f for f in self.fanouts if isinstance(f, int)]
        n_id, counted, edges, e_ids = sample_neighbors(
            graph.indptr, graph.indices, weights, seeds.long(), fanouts, self.replace,
            int(seed) & 0x7FFFFFFFFFFFFFFF, self.threads_for_call(),
            edge_ids=self.with_edge_ids or types is not None, typed=typed)
        counts: list[int] = counted.tolist()
        blocks = []
        for h in reversed(range(len(edges))):
            e_id = None if e_ids is None else e_ids[h]
            kind = None if types is None or e_id is None else types[e_id].long()
            blocks.append(Block(edges[h], (counts[h + 1], counts[h]), n_id[: counts[h + 1]],
                                e_id=e_id, edge_type=kind))
        return MiniBatch(n_id=n_id, blocks=blocks, num_targets=counts[0])

    def __repr__(self) -> str:
        ids = ", with_edge_ids=True" if self.with_edge_ids else ""
        return (f"NeighborSampler(fanouts={self.fanouts}, replace={self.replace}, "
                f"weighted={self.weighted}, threads={self.threads}{ids})")


