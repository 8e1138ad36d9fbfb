"""Samplers that turn seed vertices into per-layer bipartite blocks (see ``base``;
``schemas``: the options' typed configs, torch-free; ``codec``: a mini-batch's one wire
format)."""

from gnnscale.lazy import lazy_exports

_EXPORTS = {"Block": "gnnscale.sampling.base", "MiniBatch": "gnnscale.sampling.base",
            "Sampler": "gnnscale.sampling.base", "NeighborSampler": "gnnscale.sampling.neighbor",
            "FullNeighborSampler": "gnnscale.sampling.full",
            "gather_rows": "gnnscale.sampling.gather", "empty_huge": "gnnscale.sampling.gather"}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)  # they import torch; the schemas do not
