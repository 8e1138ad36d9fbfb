"""Feature store and cache policies (none, degree, presample, random, oracle; placement;
``schemas``: the options' typed configs, torch-free)."""

import importlib

_EXPORTS = {"CachePolicy": "gnnscale.cache.base", "visit_counts": "gnnscale.cache.base",
            "DistExchange": "gnnscale.cache.exchange", "LocalExchange": "gnnscale.cache.exchange",
            "FeatureStore": "gnnscale.cache.store", "build_feature_store": "gnnscale.cache.store",
            "owner_map": "gnnscale.cache.store", "select_cached": "gnnscale.cache.store"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """The exports on first use (they import torch; the schemas do not)."""
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
