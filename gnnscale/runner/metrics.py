"""Per-epoch metrics: names, reduction over the reporting ranks, JSON lines, summary table.

Counts and bytes are summed over ranks; times (``*_time``) are per-rank means, except
``epoch_time`` which is the slowest rank's wall time; ``peak_memory`` is the largest rank's;
``train_loss`` is the mean over ranks (and so are ``replication_alpha`` and
``recompute_time``); ``peak_device_bytes`` and ``device_bound_bytes`` are the largest rank's;
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

from gnnscale.distributed.devices import allocator_peak

MAX_KEYS = {"epoch_time", "peak_memory", "edge_skew", "peak_device_bytes", "device_bound_bytes",
            "presample_time"}
MEAN_KEYS = {"sample_time", "split_time", "load_time", "compute_time", "comm_time",
             "train_loss", "local_edge_ratio", "replication_alpha", "recompute_time"}
COLUMNS = ("epoch", "train_loss", "val_loss", "val_acc", "test_acc", "val_rocauc", "test_rocauc",
           "epoch_time", "sample_time", "load_time", "compute_time", "comm_time",
           "cache_hit_rate", "bytes_host_to_rank",
           "bytes_rank_to_rank", "local_edge_ratio", "edge_skew", "bytes_shuffled")


def peak_memory(device: torch.device) -> int:
    """Peak bytes of this process: CUDA allocator peak on a GPU (since the last reset: offload
    resets it every epoch), max RSS on the CPU."""
    peak = allocator_peak(device)
    if peak is not None:
        return peak
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


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
        if key in MAX_KEYS:
            out[key] = max(values)
        elif key in MEAN_KEYS:
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
