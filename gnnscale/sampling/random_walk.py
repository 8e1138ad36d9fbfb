"""PinSAGE-style random-walk sampling (FGNN's PinSAGE workload, section 7.1), native.

Per hop, every vertex sampled so far starts ``num_walks`` walks of ``walk_length`` steps along
in-edges; the ``top_k`` vertices its walks visit most often (itself excluded; ties broken by
the smaller id) become its neighbours in that hop's block, and their visit counts (PinSAGE's
importance weights) the block's ``edge_weight`` (float32). Hops run as the neighbour sampler's
do: each block's destinations are the first ``n_dst`` of its sources, and each hop's new
vertices are appended to ``n_id`` in ascending id order. The walks run in the native op
:func:`gnnscale.ops.sampling.random_walk_top_k`: walk ``w`` of vertex ``v`` in hop ``h`` is
keyed by ``(seed, h, v, w)``, so a draw is a function of ``seed``, the seeds and the graph
only, whatever the thread count. A block's edges are synthetic (a vertex to the vertices its
walks visit, not graph edges), so its ``e_id`` and ``edge_type`` are None.
"""

from __future__ import annotations

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.ops.sampling import random_walk_top_k
from gnnscale.sampling.base import Block, MiniBatch, Sampler
from gnnscale.sampling.neighbor import threads_for
from gnnscale.sampling.schemas import RandomWalkSamplerConfig


class RandomWalkSampler(Sampler):
    """``num_layers`` hops of random-walk neighbourhoods (see the module docstring).

    ``threads`` > 0 fixes the native op's thread count; 0 picks it per call as the neighbour
    sampler does (:func:`gnnscale.sampling.neighbor.threads_for`).
    """

    #: Blocks carry ``edge_weight`` (visit counts): strategies and models check they can use it.
    weighted_blocks = RandomWalkSamplerConfig.weighted_blocks

    def __init__(self, num_layers: int = 3, num_walks: int = 4, walk_length: int = 3,
                 top_k: int = 5, threads: int = 0) -> None:
        RandomWalkSamplerConfig(num_layers=num_layers, num_walks=num_walks,
                                walk_length=walk_length, top_k=top_k, threads=threads).check()
        self.num_layers, self.num_walks = int(num_layers), int(num_walks)
        self.walk_length, self.top_k, self.threads = int(walk_length), int(top_k), int(threads)

    def threads_for_call(self) -> int:
        """Threads of the next :meth:`sample` (:func:`threads_for` of ``threads``)."""
        return threads_for(self.threads)

    def sample(self, graph: GraphStore, seeds: torch.Tensor, seed: int = 0) -> MiniBatch:
        """Per hop, each vertex's ``top_k`` most walk-visited vertices, visit counts as weights."""
        n_id = torch.as_tensor(seeds).reshape(-1)
        if n_id.is_floating_point() or n_id.dtype == torch.bool:
            raise TypeError(f"seeds must hold integer vertex ids, got {n_id.dtype}")
        n_id = n_id.long()
        if n_id.numel() and (int(n_id.min()) < 0 or int(n_id.max()) >= graph.num_nodes):
            raise ValueError(f"seeds hold ids in [{int(n_id.min())}, {int(n_id.max())}] but "
                             f"graph {graph.name!r} has {graph.num_nodes} nodes")
        num_targets, threads = n_id.numel(), self.threads_for_call()
        local = torch.full((graph.num_nodes,), -1, dtype=torch.int64)  # global -> local id
        local[n_id] = torch.arange(num_targets)
        blocks = []
        for hop in range(self.num_layers):
            dst = n_id
            owner, vertex, visits = random_walk_top_k(
                graph.indptr, graph.indices, dst, self.num_walks, self.walk_length, self.top_k,
                int(seed) & 0x7FFFFFFFFFFFFFFF, hop, threads)
            src_local = local[vertex]
            new = torch.unique(vertex[src_local < 0])  # ascending ids
            local[new] = torch.arange(n_id.numel(), n_id.numel() + new.numel())
            n_id = torch.cat([n_id, new])
            src_local = local[vertex]
            blocks.append(Block(torch.stack([src_local, owner]), (n_id.numel(), dst.numel()),
                                n_id, edge_weight=visits.float()))
        return MiniBatch(n_id=n_id, blocks=blocks[::-1], num_targets=num_targets)

    def __repr__(self) -> str:
        return (f"RandomWalkSampler(num_layers={self.num_layers}, num_walks={self.num_walks}, "
                f"walk_length={self.walk_length}, top_k={self.top_k}, threads={self.threads})")


