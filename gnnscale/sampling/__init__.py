"""Samplers that turn seed vertices into per-layer bipartite blocks (see ``base``;
``schemas``: the options' typed configs, torch-free)."""

import importlib

_EXPORTS = {"Block": "gnnscale.sampling.base", "MiniBatch": "gnnscale.sampling.base",
            "Sampler": "gnnscale.sampling.base", "NeighborSampler": "gnnscale.sampling.neighbor",
            "FullNeighborSampler": "gnnscale.sampling.full",
            "gather_rows": "gnnscale.sampling.gather", "empty_huge": "gnnscale.sampling.gather"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """The exports on first use (they import torch; the schemas do not)."""
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
