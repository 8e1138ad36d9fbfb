"""Suite ``evaluate``: layer-wise evaluation with reordered layers against every layer a conv.

GCN (2 layers, 64 hidden, ``gcn_norm=graph``) evaluated on the whole graph in one batch, as the
accuracy experiments do (``eval_batch_size: 1000000``), on 1 and 2 ranks (gloo, one thread
each). Variants alternate in one process; each figure is the median of ``repeats`` timings.
Graphs: the wide-feature Coauthor CS (6,805 features) and Physics (8,415) when the shared
datasets are there; ``--quick`` (or without them) a synthetic graph with 2,000 features.
Also recorded: whether both variants give the same metrics.
"""

from __future__ import annotations

import statistics
import time

import torch


def settings(quick: bool) -> dict:
    return {"repeats": 3 if quick else 5, "hidden": 64, "batch": 1_000_000,
            "graphs": ["synthetic"] if quick else ["cs", "physics"]}


def _graph(name: str):
    from gnnscale.data.convert import shared_datasets_dir
    from gnnscale.data.npz import NpzDataset
    from gnnscale.data.synthetic import SyntheticDataset

    root = "/tmp/gnnscale-bench-evaluate"
    if name != "synthetic" and shared_datasets_dir() is not None:
        return NpzDataset(root, name).load()
    return SyntheticDataset(root, preset="small", scale=0.2, num_features=2000).load()


def _ranks(topo, name: str, cfg: dict) -> dict:
    """Rank function: time both variants of :func:`evaluate`, alternating."""
    import torch.distributed as dist

    import gnnscale.evaluation.evaluate as E
    from gnnscale.models.gcn import GCN

    g = _graph(name)
    torch.manual_seed(0)
    model = GCN(g.num_features, g.num_classes, hidden=cfg["hidden"], num_layers=2,
                gcn_norm="graph")
    model.bind_graph(g)
    layerwise = E.layerwise_logits
    times: dict[str, list[float]] = {"conv": [], "reordered": []}
    metrics: dict[str, dict] = {}
    for _ in range(cfg["repeats"] + 1):  # the first round warms up
        for variant in times:
            reorder = variant == "reordered"
            E.layerwise_logits = lambda *a, r=reorder, **k: layerwise(*a, **k, reorder=r)
            if dist.is_initialized():
                dist.barrier()
            t0 = time.perf_counter()
            metrics[variant] = E.evaluate(model, g, torch.device("cpu"), cfg["batch"])
            times[variant].append(time.perf_counter() - t0)
    E.layerwise_logits = layerwise
    return {"nodes": g.num_nodes, "features": g.num_features,
            "seconds": {k: statistics.median(v[1:]) for k, v in times.items()},
            "same_metrics": metrics["conv"] == metrics["reordered"]}


def run(quick: bool) -> dict:
    from benchmarks import ratio
    from gnnscale.distributed import spawn

    cfg = settings(quick)
    results: dict = {}
    ratios: dict = {}
    for name in cfg["graphs"]:
        for world in (1, 2):
            out = spawn(_ranks, world, name, cfg, threads_per_rank=1, timeout_s=1800.0,
                        cores="auto")[0]
            results[f"{name}_{world}_ranks"] = out
            ratios[f"{name}_{world}_ranks_conv_over_reordered"] = ratio(
                out["seconds"]["conv"], out["seconds"]["reordered"])
    return {"config": cfg, "results": results, "ratios": ratios}
