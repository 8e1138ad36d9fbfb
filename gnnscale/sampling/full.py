"""Full-neighborhood layer-wise sampling: every in-neighbor of every vertex, each layer."""

from __future__ import annotations

from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.schemas import FullNeighborSamplerConfig


class FullNeighborSampler(NeighborSampler):
    """The exact ``num_layers``-hop in-neighborhood of the seeds (fanout -1 in every layer);
    ``with_edge_ids`` as the neighbor sampler's (each block's ``e_id`` then lists every
    in-edge of its destinations)."""

    def __init__(self, num_layers: int = 3, with_edge_ids: bool = False):
        FullNeighborSamplerConfig(num_layers=num_layers).check()
        super().__init__([-1] * int(num_layers), with_edge_ids=with_edge_ids)

    def __repr__(self) -> str:
        ids = ", with_edge_ids=True" if self.with_edge_ids else ""
        return f"FullNeighborSampler(num_layers={self.num_layers}{ids})"


