"""PinSAGE-style random-walk sampling (FGNN's PinSAGE workload, section 7.1), vectorised torch.

Per hop, every vertex sampled so far starts ``num_walks`` walks of ``walk_length`` steps along
in-edges; the ``top_k`` vertices its walks visit most often (itself excluded; ties broken by
the smaller id) become its neighbours in that hop's block. Hops run as the neighbour sampler's
do: each block's destinations are the first ``n_dst`` of its sources, and new vertices are
appended to ``n_id``. The visit counts (PinSAGE's importance weights) are kept on the sampler's
last draw (``last_visit_counts``, one tensor per block, input layer first). The blocks carry no
edge weights, so models aggregate them unweighted. A draw is a function of ``seed``, the seeds
and the graph: hop ``h`` uses a generator seeded with ``mix_seed(seed, h)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.registry import register
from gnnscale.sampling.base import Block, MiniBatch, Sampler
from gnnscale.sampling.schedule import mix_seed


class RandomWalkSampler(Sampler):
    """``num_layers`` hops of random-walk neighbourhoods (see the module docstring)."""

    def __init__(self, num_layers: int = 3, num_walks: int = 4, walk_length: int = 3,
                 top_k: int = 5) -> None:
        for key, value in (("num_layers", num_layers), ("num_walks", num_walks),
                           ("walk_length", walk_length), ("top_k", top_k)):
            if int(value) < 1:
                raise ValueError(f"sampler.{key} must be >= 1, got {value}")
        self.num_layers, self.num_walks = int(num_layers), int(num_walks)
        self.walk_length, self.top_k = int(walk_length), int(top_k)
        self.last_visit_counts: list[torch.Tensor] = []

    def sample(self, graph: GraphStore, seeds: torch.Tensor, seed: int = 0) -> MiniBatch:
        n_id = torch.as_tensor(seeds).reshape(-1).long()
        num_targets = n_id.numel()
        blocks, counts = [], []
        for hop in range(self.num_layers):
            gen = torch.Generator().manual_seed(mix_seed(seed, hop))
            dst = n_id
            owner, vertex, visits = self._top_visited(graph, dst, gen)
            new = torch.unique(vertex[~torch.isin(vertex, n_id)])
            n_id = torch.cat([n_id, new])
            ordered, perm = n_id.sort()
            src_local = perm[torch.searchsorted(ordered, vertex)]
            blocks.append(Block(torch.stack([src_local, owner]), (n_id.numel(), dst.numel()),
                                n_id))
            counts.append(visits)
        self.last_visit_counts = counts[::-1]
        return MiniBatch(n_id=n_id, blocks=blocks[::-1], num_targets=num_targets)

    def _top_visited(self, graph: GraphStore, dst: torch.Tensor, gen: torch.Generator
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(owner position, visited vertex, visit count)`` of each kept neighbour."""
        indptr, indices = graph.indptr, graph.indices
        owner = torch.arange(dst.numel()).repeat_interleave(self.num_walks)
        cur = dst.repeat_interleave(self.num_walks)
        alive = torch.ones_like(cur, dtype=torch.bool)
        seen_owner, seen_vertex = [], []
        for _ in range(self.walk_length):
            start = indptr[cur]
            deg = indptr[cur + 1] - start
            alive &= deg > 0  # a walk reaching a vertex without in-edges stops there
            pick = (torch.rand(cur.numel(), generator=gen) * deg).long()
            nxt = indices[(start + pick).clamp(max=max(indices.numel() - 1, 0))] \
                if indices.numel() else cur
            cur = torch.where(alive, nxt.long(), cur)
            seen_owner.append(owner[alive])
            seen_vertex.append(cur[alive])
        o, v = torch.cat(seen_owner), torch.cat(seen_vertex)
        keep = v != dst[o]
        o, v = o[keep], v[keep]
        n = max(graph.num_nodes, 1)
        pairs, visits = torch.unique(o * n + v, return_counts=True)  # by owner, then vertex
        o, v = pairs // n, pairs % n
        order = torch.argsort(-visits, stable=True)  # most visited first, ids ascending
        order = order[torch.argsort(o[order], stable=True)]  # grouped by owner again
        o, v, visits = o[order], v[order], visits[order]
        first = torch.searchsorted(o, o, right=False)
        rank = torch.arange(o.numel()) - first
        top = rank < self.top_k
        return o[top], v[top], visits[top]

    def __repr__(self) -> str:
        return (f"RandomWalkSampler(num_layers={self.num_layers}, num_walks={self.num_walks}, "
                f"walk_length={self.walk_length}, top_k={self.top_k})")


@register("sampler", "random_walk")
@dataclass
class RandomWalkSamplerConfig:
    """``sampler=random_walk``: PinSAGE's neighbourhoods (FGNN: 4 walks of length 3, top 5)."""

    _target_: str = "gnnscale.sampling.random_walk.RandomWalkSampler"
    num_layers: int = 3
    num_walks: int = 4
    walk_length: int = 3
    top_k: int = 5
