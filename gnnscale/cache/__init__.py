"""Feature store and cache policies (none, degree, presample, random, oracle; placement;
``schemas``: the options' typed configs, torch-free)."""

from gnnscale.lazy import lazy_exports

_EXPORTS = {"CachePolicy": "gnnscale.cache.base", "visit_counts": "gnnscale.cache.base",
            "DistExchange": "gnnscale.cache.exchange", "LocalExchange": "gnnscale.cache.exchange",
            "FeatureStore": "gnnscale.cache.store", "build_feature_store": "gnnscale.cache.store",
            "owner_map": "gnnscale.cache.store", "select_cached": "gnnscale.cache.store"}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)  # they import torch; the schemas do not
