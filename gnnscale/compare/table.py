"""One row per run: epoch time, time to a target accuracy, accuracy at equal epochs and at equal
time, bytes per tier, edges computed, peak memory; and, when a run trained a typed graph, a
second table of what each run moves per epoch on it (:func:`typed_rows`). Markdown and JSON
out."""

from __future__ import annotations

import statistics
from typing import Any

from gnnscale.compare.runs import Run, strategy_class

# Per-epoch byte counters the strategies report, grouped by the link they use. Counters absent
# from a run are zero for it (e.g. fullgraph loads its features once, before the first epoch).
HOST_KEYS = ("bytes_host_to_rank",)  # host memory -> rank (PCIe on a GPU)
# rank -> rank (bytes_pair_exchange: link prediction's endpoint rows, gnnscale/tasks/link/pairs.py;
# bytes_remote_owner: feature rows fetched from the rank owning them, parts=)
PEER_KEYS = ("bytes_rank_to_rank", "bytes_shuffled", "bytes_queue_received",
             "bytes_pair_exchange", "bytes_remote_owner")
GRAD_KEYS = ("bytes_allreduce",)  # gradient all-reduce (every rank's buffer, summed)
LOCAL_LAUNCHERS = ("gnnscale.distributed.local.Launcher",)
# A typed run's feature bytes per node type (the feature stores count them per featured type).
TYPED_HOST_PREFIX = "bytes_host_to_rank."
# Sampled blocks sent between ranks (factored's queue, split's sample parts): ids, not rows.
SAMPLE_KEYS = ("bytes_queue_received", "bytes_sample_received")


def epoch_mean(run: Run, keys: tuple[str, ...]) -> float:
    """Mean over epochs of the sum of ``keys`` (0 when the run reports none of them)."""
    return statistics.fmean(sum(float(h.get(k, 0.0)) for k in keys) for h in run.history)


def evaluated(run: Run) -> list[tuple[int, float, dict]]:
    """``(epochs done, cumulative training seconds, record)`` of every evaluated epoch."""
    out, elapsed = [], 0.0
    for i, h in enumerate(run.history):
        elapsed += float(h["epoch_time"])
        if f"val_{run.metric}" in h:
            out.append((i + 1, elapsed, h))
    return out


def default_target(runs: list[Run], fraction: float = 0.95) -> float:
    """``fraction`` of the best final validation score among the runs."""
    finals = [evaluated(r)[-1][2][f"val_{r.metric}"] for r in runs if evaluated(r)]
    if not finals:
        raise ValueError("no run evaluated the validation split (set eval_every >= 1)")
    return fraction * max(finals)


def time_to_target(run: Run, target: float) -> tuple[float | None, int | None]:
    """Training seconds and epochs until the validation score first reaches ``target``."""
    for epochs, elapsed, h in evaluated(run):
        if h[f"val_{run.metric}"] >= target:
            return elapsed, epochs
    return None, None


def _test_at(run: Run, epochs: int | None = None, seconds: float | None = None) -> float | None:
    """Test score of the last evaluation within ``epochs`` epochs or ``seconds`` of training."""
    best = None
    for done, elapsed, h in evaluated(run):
        if (epochs is not None and done > epochs) or (seconds is not None and elapsed > seconds):
            break
        best = h.get(f"test_{run.metric}")
    return best


def build_rows(runs: list[Run], target: float, projections: dict[str, float] | None = None
               ) -> list[dict[str, Any]]:
    """The comparison rows. Equal epochs = the fewest epochs any run trained; equal time = the
    shortest total training time of any run (evaluation time excluded everywhere)."""
    equal_epochs = min(len(r.history) for r in runs)
    equal_time = min(sum(float(h["epoch_time"]) for h in r.history) for r in runs)
    rows = []
    for run in runs:
        last = evaluated(run)[-1][2] if evaluated(run) else {}
        t_target, e_target = time_to_target(run, target)
        local = run.config.get("dist", {}).get("_target_") in LOCAL_LAUNCHERS
        row = {
            "label": run.label, "strategy": run.strategy, "run_dir": str(run.path),
            "world_size": run.world_size, "epochs": len(run.history), "metric": run.metric,
            "epoch_time_s": statistics.median(float(h["epoch_time"]) for h in run.history),
            "time_to_target_s": t_target, "epochs_to_target": e_target,
            "final_val": last.get(f"val_{run.metric}"),
            "final_test": last.get(f"test_{run.metric}"),
            "test_at_equal_epochs": _test_at(run, epochs=equal_epochs),
            "test_at_equal_time": _test_at(run, seconds=equal_time),
            "bytes_host_to_rank": epoch_mean(run, HOST_KEYS),
            "bytes_rank_to_rank": epoch_mean(run, PEER_KEYS),
            "bytes_allreduce": epoch_mean(run, GRAD_KEYS),
            # one host: nothing crosses a network (projections place ranks on nodes)
            "bytes_network": 0.0 if local else None,
            "edges_computed": epoch_mean(run, ("edges_computed",)),
            "peak_memory_bytes": max(float(h.get("peak_memory", 0.0)) for h in run.history),
        }
        if projections is not None:
            row["modelled_epoch_time_s"] = projections.get(run.label)
        rows.append(row)
    return rows


def is_typed(run: Run) -> bool:
    """Whether ``run`` trained a typed graph (its graph sizes name node types, or its epochs
    report bytes per node type or embedding tables)."""
    if (run.graph or {}).get("node_types"):
        return True
    return any(k.startswith(TYPED_HOST_PREFIX) or k == "embedding_rows_held"
               for h in run.history for k in h)


def exchange_keys(run: Run) -> tuple[str, ...] | None:
    """The counters of hidden rows the run's strategy sends between ranks (its declared
    ``exchange_keys``; empty: it exchanges none); None when its class cannot be imported."""
    cls = strategy_class(run.config)
    return None if cls is None else tuple(getattr(cls, "exchange_keys", ()))


def typed_rows(runs: list[Run]) -> list[dict[str, Any]]:
    """Per run, the bytes it moves per epoch on a typed graph (means over epochs, summed over
    ranks unless named per rank): host->rank (and the feature rows of each node type in it),
    edge features, feature rows rank->rank, hidden rows exchanged (None: its strategy
    exchanges none), sampled blocks rank->rank, gradients (dense all-reduce plus the embedding
    tables' sparse rows), and the embedding rows each rank looks up and their bytes."""
    types = sorted({k[len(TYPED_HOST_PREFIX):] for r in runs for h in r.history for k in h
                    if k.startswith(TYPED_HOST_PREFIX)})
    rows = []
    for run in runs:
        hidden = exchange_keys(run)
        peer = 0.0 if hidden and "bytes_rank_to_rank" in hidden else \
            epoch_mean(run, ("bytes_rank_to_rank",))
        held = epoch_mean(run, ("embedding_rows_held",))
        touched = epoch_mean(run, ("embedding_rows_touched",))
        per_row = epoch_mean(run, ("embedding_bytes",)) / held if held else 0.0
        rows.append({
            "label": run.label, "strategy": run.strategy, "world_size": run.world_size,
            "bytes_host_to_rank": epoch_mean(run, HOST_KEYS),
            "bytes_host_to_rank_per_type": {t: epoch_mean(run, (TYPED_HOST_PREFIX + t,))
                                            for t in types},
            "bytes_edge_features": epoch_mean(run, ("bytes_edge_features",)),
            "bytes_features_rank_to_rank": peer,
            "bytes_hidden_exchanged": epoch_mean(run, hidden) if hidden else None,
            "bytes_samples_rank_to_rank": epoch_mean(run, SAMPLE_KEYS),
            "bytes_gradients": epoch_mean(run, GRAD_KEYS),
            "embedding_rows_held_per_rank": held,
            "embedding_rows_touched_per_rank": touched,
            "embedding_bytes_touched_per_rank": touched * per_row,
        })
    return rows


def report(runs: list[Run], rows: list[dict[str, Any]], target: float,
           hardware: str | None = None) -> dict[str, Any]:
    """The JSON document: rows plus what the equal-epoch/equal-time columns refer to (and,
    when a run trained a typed graph, ``typed``: :func:`typed_rows`)."""
    typed = any(is_typed(r) for r in runs)
    return {
        **({"typed": typed_rows(runs)} if typed else {}),
        "target_val": target,
        "equal_epochs": min(len(r.history) for r in runs),
        "equal_time_s": min(sum(float(h["epoch_time"]) for h in r.history) for r in runs),
        "hardware": hardware, "rows": rows,
        "notes": ("bytes and edges per epoch (mean); peak memory is the largest rank's max RSS "
                  "(CPU) or CUDA allocator peak; times exclude evaluation"
                  + ("; modelled_epoch_time_s is projected by gnnscale.cost, not measured"
                     if hardware else "")),
    }


def _fmt_bytes(v: float | None) -> str:
    if v is None:
        return "n/a"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.2f} {unit}"
    return f"{v:.0f} B"


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}" if abs(v) < 1e5 else f"{v:.3g}"
    return str(v)


def markdown(doc: dict[str, Any]) -> str:
    """The comparison as a markdown table with a line on what the columns mean."""
    rows = doc["rows"]
    modelled = any("modelled_epoch_time_s" in r for r in rows)
    head = ["run", "ranks", "epoch s (median)", f"s to val {doc['target_val']:.3f}",
            "final test", f"test @{doc['equal_epochs']} ep", f"test @{doc['equal_time_s']:.3f} s",
            "host->rank /ep", "rank->rank /ep", "all-reduce /ep", "network /ep",
            "edges /ep", "peak mem"]
    if modelled:
        head.append(f"epoch s on {doc['hardware']} (modelled)")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        tt = (f"{r['time_to_target_s']:.3f} ({r['epochs_to_target']} ep)"
              if r["time_to_target_s"] is not None else "not reached")
        cells = [r["label"], str(r["world_size"]), _fmt(r["epoch_time_s"]), tt,
                 _fmt(r["final_test"]), _fmt(r["test_at_equal_epochs"]),
                 _fmt(r["test_at_equal_time"]), _fmt_bytes(r["bytes_host_to_rank"]),
                 _fmt_bytes(r["bytes_rank_to_rank"]), _fmt_bytes(r["bytes_allreduce"]),
                 _fmt_bytes(r["bytes_network"]), f"{r['edges_computed']:,.0f}",
                 _fmt_bytes(r["peak_memory_bytes"])]
        if modelled:
            cells.append(_fmt(r.get("modelled_epoch_time_s"), 4))
        lines.append("| " + " | ".join(cells) + " |")
    metric = rows[0]["metric"] if rows else "acc"
    lines.append("")
    lines.append(f"Scores are {metric}; times exclude evaluation; bytes and edges are per-epoch "
                 "means summed over ranks; peak memory is the largest rank's."
                 + (" The last column is modelled (gnnscale.cost), not measured." if modelled
                    else ""))
    if doc.get("typed"):
        lines += ["", typed_markdown(doc["typed"])]
    return "\n".join(lines) + "\n"


def typed_markdown(rows: list[dict[str, Any]]) -> str:
    """The typed runs' bytes per epoch as a markdown table, with a line on the columns."""
    types = sorted({t for r in rows for t in r["bytes_host_to_rank_per_type"]})
    head = ["run", "host->rank", *(f"of which {t} features" for t in types), "edge features",
            "features rank->rank", "hidden rows exchanged", "samples rank->rank", "gradients",
            "embedding rows touched /rank", "embedding bytes touched /rank"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        hidden = r["bytes_hidden_exchanged"]
        cells = [r["label"], _fmt_bytes(r["bytes_host_to_rank"]),
                 *(_fmt_bytes(r["bytes_host_to_rank_per_type"].get(t, 0.0)) for t in types),
                 _fmt_bytes(r["bytes_edge_features"]),
                 _fmt_bytes(r["bytes_features_rank_to_rank"]),
                 "none" if hidden is None else _fmt_bytes(hidden),
                 _fmt_bytes(r["bytes_samples_rank_to_rank"]), _fmt_bytes(r["bytes_gradients"]),
                 f"{r['embedding_rows_touched_per_rank']:,.0f} of "
                 f"{r['embedding_rows_held_per_rank']:,.0f}",
                 _fmt_bytes(r["embedding_bytes_touched_per_rank"])]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Typed graph, bytes per epoch (mean over epochs, summed over ranks unless "
                 "/rank): host->rank is every byte read from host memory (features, and for an "
                 "offloaded run its hidden rows too), with each node type's feature rows in it; "
                 "hidden rows exchanged are the activations and gradients the strategy sends "
                 "between ranks (none: it sends none); samples are sampled blocks' ids; "
                 "gradients are the dense all-reduce plus the embedding tables' sparse rows; "
                 "embedding rows touched are the featureless rows a rank looks up (of the rows "
                 "it holds).")
    return "\n".join(lines)
