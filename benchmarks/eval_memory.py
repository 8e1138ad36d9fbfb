"""Suite ``eval_memory``: the memory layer-wise evaluation adds to each rank.

SAGE (3 layers of 256, 47 classes) evaluated over every vertex of a random graph (600,000
vertices, 3,000,000 edges, 100 features; ``--quick``: 100,000 and 500,000) on 2 gloo ranks,
as a run's evaluation does it: each layer's rows computed for every vertex, each rank its
share, then gathered on every rank. Per rank: the peak resident memory the evaluation adds
(``ru_maxrss`` after it less before it), its seconds, and a checksum of the logits (equal
before and after a change that only moves memory). A whole layer's rows of the graph are
``vertices x 256 x 4`` bytes (``layer_rows_mib``): the ratio says how many such copies a rank
held at its peak. Run a before/after as ``PYTHONPATH=<other clone> python -m benchmarks
eval_memory``.
"""

from __future__ import annotations

import resource
import time

import torch


def settings(quick: bool) -> dict:
    return {"vertices": 100_000 if quick else 600_000, "edges": 500_000 if quick else 3_000_000,
            "features": 100, "hidden": 256, "layers": 3, "classes": 47, "batch": 8192,
            "ranks": 2}


def _rank(topo, cfg: dict) -> dict:
    """Rank function: build the graph and model (seeded alike on every rank), evaluate once."""
    from gnnscale.data.graph import GraphStore
    from gnnscale.evaluation.evaluate import layerwise_logits
    from gnnscale.models.sage import SAGE

    n = cfg["vertices"]
    gen = torch.Generator().manual_seed(0)
    edges = torch.randint(0, n, (2, cfg["edges"]), generator=gen)
    graph = GraphStore.from_edge_index(edges, n, x=torch.randn(n, cfg["features"],
                                                               generator=gen))
    torch.manual_seed(0)
    model = SAGE(cfg["features"], cfg["classes"], hidden=cfg["hidden"],
                 num_layers=cfg["layers"])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    with torch.no_grad():
        out = layerwise_logits(model, graph, torch.arange(n), torch.device("cpu"), cfg["batch"])
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"added_mib": (peak - before) / 1024, "peak_mib": peak / 1024, "seconds": seconds,
            "checksum": float(out.double().sum())}


def run(quick: bool) -> dict:
    from gnnscale.distributed import spawn

    cfg = settings(quick)
    ranks = spawn(_rank, cfg["ranks"], cfg, timeout_s=1800.0)
    layer_mib = cfg["vertices"] * cfg["hidden"] * 4 / 2**20
    most = max(r["added_mib"] for r in ranks)
    return {"config": cfg,
            "results": {"per_rank": ranks, "layer_rows_mib": layer_mib, "added_mib_max": most},
            "ratios": {"added_over_layer_rows": most / layer_mib}}
