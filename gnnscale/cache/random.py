"""``cache=random``: a uniformly random set of vertices (the baseline of GNNLab's Fig. 10)."""

from __future__ import annotations

from typing import Any

import torch

from gnnscale.cache.base import CachePolicy
from gnnscale.data.graph import GraphStore
from gnnscale.sampling.schedule import mix_seed


class RandomPolicy(CachePolicy):
    """Random hotness from ``seed`` (the run's seed when ``seed`` is None)."""

    name = "random"

    def __init__(self, seed: int | None = None, **budget: Any) -> None:
        super().__init__(**budget)
        self.seed = seed

    def hotness(self, graph: GraphStore, *, seed: int = 0, **kwargs: Any) -> torch.Tensor:
        """Uniform random scores keyed by ``self.seed`` (else the run's ``seed``)."""
        s = self.seed if self.seed is not None else seed
        gen = torch.Generator().manual_seed(mix_seed(s, 0x5EED))
        return torch.rand(graph.num_nodes, generator=gen, dtype=torch.float64)
