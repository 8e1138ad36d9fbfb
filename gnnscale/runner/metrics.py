"""Per-epoch metrics: names, reduction over the reporting ranks, JSON lines, summary table.

How each metric combines over the reporting ranks is declared here, by name
(:func:`reduction`), never by a strategy dividing its own figure:

- the largest rank's: ``epoch_time`` (the slowest rank's wall time), ``presample_time`` (the
  slowest sampler's), ``peak_memory``, ``peak_device_bytes``, ``device_bound_bytes``,
  ``edge_skew``;
- the sum of the ranks' seconds: the role totals of ``strategy=factored``
  (``sampler_busy_time``, ``sampler_idle_time``, ``trainer_busy_time``,
  ``trainer_idle_time``, ``standby_train_time``: seconds summed over the samplers or trainers);
- the mean over ranks: every other ``*_time`` (``sample_time``, ``split_time``,
  ``load_time``, ``compute_time``, ``comm_time``, ``recompute_time``, ``plan_time``, and any
  new one), ``train_loss``, ``local_edge_ratio``, ``replication_alpha``;
- the sum: everything else (counts, bytes).

``cache_hit_rate`` is recomputed from the summed hits, and ``cache_hit_rate_per_rank`` lists
each reporting rank's own rate (group rank order: under ``strategy=factored``, one per trainer).
"""

from __future__ import annotations

import json
import resource
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from gnnscale.distributed import device as device_seam

MAX_KEYS = {"epoch_time", "peak_memory", "edge_skew", "peak_device_bytes", "device_bound_bytes",
            "presample_time"}
#: ``*_time`` keys that are totals over a role's ranks (summed), not per-rank phases
SUM_TIME_KEYS = {"sampler_busy_time", "sampler_idle_time", "trainer_busy_time",
                 "trainer_idle_time", "standby_train_time"}
#: keys other than ``*_time`` that average over ranks
MEAN_KEYS = {"train_loss", "local_edge_ratio", "replication_alpha"}
COLUMNS = ("epoch", "train_loss", "val_loss", "val_acc", "test_acc", "val_rocauc", "test_rocauc",
           "val_auc", "test_auc", "val_ap", "test_ap", "val_mrr", "test_mrr",
           "epoch_time", "sample_time", "load_time", "compute_time", "comm_time",
           "cache_hit_rate", "bytes_host_to_rank",
           "bytes_rank_to_rank", "local_edge_ratio", "edge_skew", "bytes_shuffled")


def peak_memory(device: torch.device) -> int:
    """Peak bytes of this process: the allocator's peak on a GPU, max RSS on the CPU."""
    peak = device_seam.peak_allocated(device)
    if peak is not None:
        return peak
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def reduction(key: str) -> str:
    """How metric ``key`` combines over ranks: ``max``, ``mean`` or ``sum`` (module
    docstring)."""
    if key in MAX_KEYS:
        return "max"
    if key in SUM_TIME_KEYS:
        return "sum"
    if key.endswith("_time") or key in MEAN_KEYS:
        return "mean"
    return "sum"


def reduce_over_ranks(local: dict[str, float], group: dist.ProcessGroup | None = None
                      ) -> dict[str, Any]:
    """Combine the metrics of every rank of ``group`` (collective when a process group is up)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) == 1:
        per_rank = [local]
    else:
        per_rank = [None] * dist.get_world_size(group)
        dist.all_gather_object(per_rank, local, group=group)
    out: dict[str, Any] = {}
    for key in local:
        values = [float(r[key]) for r in per_rank]
        how = reduction(key)
        if how == "max":
            out[key] = max(values)
        elif how == "mean":
            out[key] = sum(values) / len(values)
        else:
            out[key] = sum(values)
    if "hits" in out and "misses" in out:
        total = out["hits"] + out["misses"]
        out["cache_hit_rate"] = out["hits"] / total if total else 0.0
        out["cache_hit_rate_per_rank"] = [_rate(r["hits"], r["hits"] + r["misses"])
                                          for r in per_rank]
    return out


def _rate(hits: float, total: float) -> float:
    return float(hits) / float(total) if total else 0.0


class MetricsWriter:
    """Appends one JSON object per epoch to ``metrics.jsonl`` in the run folder."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: dict) -> None:
        """Append one epoch's record as a JSON line."""
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")


def _fmt(v: object) -> str:
    if isinstance(v, float):
        if abs(v) >= 1e6:
            return f"{v:.3e}"
        return f"{v:.4f}" if abs(v) < 10 else f"{v:.2f}"
    return "-" if v is None else str(v)


def summary_table(history: list[dict]) -> str:
    """A fixed-width table of the main columns, one row per epoch."""
    cols = [c for c in COLUMNS if any(c in h for h in history)]
    rows = [[_fmt(h.get(c)) for c in cols] for h in history]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    line = lambda cells: "  ".join(x.rjust(w) for x, w in zip(cells, widths))
    return "\n".join([line(cols), line(["-" * w for w in widths])] + [line(r) for r in rows])
