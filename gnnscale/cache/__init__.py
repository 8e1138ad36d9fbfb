"""Feature store and cache policies (none, degree, presample, random, oracle; placement)."""

from gnnscale.cache.base import CachePolicy, visit_counts
from gnnscale.cache.exchange import DistExchange, LocalExchange
from gnnscale.cache.store import (
    FeatureStore,
    build_feature_store,
    owner_map,
    select_cached,
)

__all__ = ["CachePolicy", "DistExchange", "FeatureStore", "LocalExchange",
           "build_feature_store", "owner_map", "select_cached", "visit_counts"]
