"""Full-neighborhood layer-wise sampling: every in-neighbor of every vertex, each layer."""

from __future__ import annotations

from gnnscale.sampling.neighbor import NeighborSampler


class FullNeighborSampler(NeighborSampler):
    """The exact ``num_layers``-hop in-neighborhood of the seeds (fanout -1 in every layer)."""

    def __init__(self, num_layers: int = 3):
        if int(num_layers) < 1:
            raise ValueError(f"sampler.num_layers must be >= 1, got {num_layers}")
        super().__init__([-1] * int(num_layers))

    def __repr__(self) -> str:
        return f"FullNeighborSampler(num_layers={self.num_layers})"


