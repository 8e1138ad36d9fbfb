"""Suite ``dropout``: the native dropout kernel against torch's, alone and in training epochs.

Two measurements, each variant side by side in one process:

- the op on a ``rows x 256`` float32 tensor: torch's ``F.dropout`` (``bernoulli_``) against
  :func:`gnnscale.models.dropout.dropout` (native, keyed by one draw from torch's generator),
  and the keyed dropout full-graph strategies use, in torch arithmetic against native;
- one epoch on the products-like ``small`` graph (1 rank, SAGE 3x256, dropout 0.5): ``data``
  with torch's dropout against the native one, and ``fullgraph`` (keyed) with the torch-
  arithmetic mask against the native one; epochs alternate between the two variants and each
  figure is the median of its epochs (warm-up excluded).
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

from benchmarks import median_time, ratio


def settings(quick: bool) -> dict:
    return {"rows": 50_000 if quick else 200_000, "cols": 256, "p": 0.5, "repeats": 5,
            "scale": 0.2 if quick else 1.0, "epochs_per_variant": 2 if quick else 3}


def _op_times(rows: int, cols: int, p: float, repeats: int) -> dict:
    from gnnscale.models import dropout as D

    x = torch.randn(rows, cols)
    ids = torch.arange(rows)
    ms = {
        "torch_dropout_ms": median_time(lambda: F.dropout(x, p, True), repeats),
        "native_dropout_ms": median_time(lambda: D.dropout(x, p), repeats),
        "torch_keyed_ms": median_time(lambda: D.reference_keyed_dropout(x, p, 7, ids), 2),
        "native_keyed_ms": median_time(lambda: D.keyed_dropout(x, p, 7, ids), repeats),
    }
    return {k: v * 1000 for k, v in ms.items()}


def _epochs(topo, overrides: list[str], epochs: int) -> dict:
    """Rank function: alternate epochs between torch's and the native dropout."""

    from omegaconf import OmegaConf

    import gnnscale.models.base as base
    from gnnscale import registry
    from gnnscale.models import dropout as D
    from gnnscale.runner.worker import build_context
    from scripts.partition import compose

    cfg = compose(overrides)
    cfg.run_dir = "/tmp/gnnscale-bench-dropout"
    cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    strategy = registry.build(cfg.strategy, ctx=build_context(topo, cfg))
    strategy.setup()
    variants = {
        "torch": (lambda h, p: F.dropout(h, p=p, training=True), D.reference_keyed_dropout),
        "native": (D.dropout, D.keyed_dropout),
    }
    strategy.train_epoch(0, None)  # warm-up
    times: dict[str, list[float]] = {"torch": [], "native": []}
    for epoch in range(1, 2 * epochs + 1):
        name = "native" if epoch % 2 else "torch"
        base.dropout, base.keyed_dropout = variants[name]
        t0 = time.perf_counter()
        strategy.train_epoch(epoch, None)
        times[name].append(time.perf_counter() - t0)
    base.dropout, base.keyed_dropout = variants["native"]
    return times


def run(quick: bool) -> dict:
    from gnnscale.distributed import spawn

    cfg = settings(quick)
    results: dict = {"op": _op_times(cfg["rows"], cfg["cols"], cfg["p"], cfg["repeats"])}
    graph = ["dataset=synthetic", "dataset.preset=small", f"dataset.scale={cfg['scale']}",
             "model=sage", "model.hidden=256", "model.num_layers=3", "model.dropout=0.5",
             "logger=none", "progress=false"]
    for strategy in ("data", "fullgraph"):
        times = spawn(_epochs, 1, graph + [f"strategy={strategy}"], cfg["epochs_per_variant"],
                      timeout_s=1800.0)[0]
        results[strategy] = {k: {"epoch_s": statistics.median(v), "epochs_s": v}
                             for k, v in times.items()}
    op = results["op"]
    ratios = {
        "op_torch_over_native": ratio(op["torch_dropout_ms"], op["native_dropout_ms"]),
        "op_keyed_torch_over_native": ratio(op["torch_keyed_ms"], op["native_keyed_ms"]),
        **{f"{s}_epoch_torch_over_native": ratio(results[s]["torch"]["epoch_s"],
                                                 results[s]["native"]["epoch_s"])
           for s in ("data", "fullgraph")},
    }
    return {"config": cfg, "results": results, "ratios": ratios}
