"""Full-neighborhood layer-wise sampling: every in-neighbor of every vertex, each layer."""

from __future__ import annotations

from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.schemas import FullNeighborSamplerConfig


class FullNeighborSampler(NeighborSampler):
    """The exact ``num_layers``-hop in-neighborhood of the seeds (fanout -1 in every layer)."""

    def __init__(self, num_layers: int = 3):
        FullNeighborSamplerConfig(num_layers=num_layers).check()
        super().__init__([-1] * int(num_layers))

    def __repr__(self) -> str:
        return f"FullNeighborSampler(num_layers={self.num_layers})"


