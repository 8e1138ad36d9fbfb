"""Samplers that turn seed vertices into per-layer bipartite blocks (see ``base``)."""

from gnnscale.sampling.base import Block, MiniBatch, Sampler
from gnnscale.sampling.full import FullNeighborSampler
from gnnscale.sampling.gather import empty_huge, gather_rows
from gnnscale.sampling.neighbor import NeighborSampler

__all__ = ["Block", "MiniBatch", "Sampler", "NeighborSampler", "FullNeighborSampler",
           "gather_rows", "empty_huge"]
