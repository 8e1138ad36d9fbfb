"""``cache=presample``: PreSC#K (GNNLab): hotness = mean visit count over K pre-sampled epochs.

The K epochs run the configured sampler over the configured training set in batches of the
training batch size, on the pre-sampling seed stream (never the draws of the training epochs).
Vertices with equal counts are ordered by out-degree (a fraction below one visit, so counts
always dominate); with few epochs this decides the many never-visited vertices.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnscale.cache.base import PRESAMPLE, CacheConfig, CachePolicy, training_set, visit_counts
from gnnscale.registry import register


@register("cache", "presample")
@dataclass
class PresampleCacheConfig(CacheConfig):
    _target_: str = "gnnscale.cache.presample.PresamplePolicy"
    epochs: int = 1


class PresamplePolicy(CachePolicy):
    """Pre-samples ``epochs`` (K) epochs and ranks vertices by how often they were inputs."""

    name = "presample"

    def __init__(self, epochs: int = 1, **budget) -> None:
        super().__init__(**budget)
        if epochs < 1:
            raise ValueError(f"cache.epochs (K of PreSC#K) must be >= 1, got {epochs}")
        self.epochs = epochs

    def hotness(self, graph, *, train_idx=None, sampler=None, batch_size: int = 1024,
                seed: int = 0, world_size: int = 1, **kwargs) -> torch.Tensor:
        if sampler is None:
            raise ValueError("cache=presample needs the configured sampler to pre-sample epochs")
        idx = training_set(graph, train_idx, self.name)
        counts = visit_counts(graph, train_idx=idx, sampler=sampler, batch_size=batch_size,
                              seed=seed, epochs=range(self.epochs), stream=PRESAMPLE,
                              world_size=world_size)
        deg = graph.out_degree().to(torch.float64)
        tie = deg / (float(deg.max()) + 1.0) if deg.numel() else deg
        return (counts + tie) / self.epochs
