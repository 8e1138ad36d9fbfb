"""Rank functions for the edge feature tests (module level, so spawn can import them)."""

from __future__ import annotations

from tests._data_fns import EDGE_MODELS
from tests._factored_fns import train_one_epoch


def edge_strategies(topo, models: tuple[str, ...] = EDGE_MODELS) -> dict:
    """Per model that reads edge features: data on every rank, factored with one sampler rank
    and the shared queue, and factored with fixed routes; and ``gat_edge`` on fixed routes with
    switching (``out["switching"]``); this rank's results."""
    out = {}
    for name in models:
        out[name] = {
            "data": train_one_epoch(topo, "data", model=name),
            "shared": train_one_epoch(topo, "factored", "1", queue="shared", model=name),
            "routes": train_one_epoch(topo, "factored", "1", queue="routes", model=name),
        }
    # routes with switching (the step-synchronised loop; the sampler rank trains standby jobs)
    out["switching"] = train_one_epoch(topo, "factored", "1", 2, True, model="gat_edge")
    return out
