"""Per-epoch metrics: reduction over the reporting ranks, JSON lines, summary table.

How each metric combines over the reporting ranks (``max``, ``mean`` or ``sum``) is declared
by whoever reports it, never by a strategy dividing its own figure: the run's strategy
(``StrategyConfig.reductions``: ``epoch_time`` the slowest rank's, ``train_loss`` and the
phase times the mean, ``factored``'s role totals summed, ...), its task
(``TaskConfig.reductions``: link prediction's ``bytes_pair_exchange``) and the runner for the
figure it measures itself (:data:`RUNNER`: ``peak_memory``). :func:`declared_reductions`
collects them from the config (torch-free), :func:`reduction` applies them. A figure nobody
declares reduces by its name: a ``*_time`` is a per-rank phase (the mean over ranks), anything
else is a count or bytes (the sum); so a new phase or counter needs no declaration, a new
maximum, total of seconds or ratio does.

``cache_hit_rate`` is recomputed from the summed hits, and ``cache_hit_rate_per_rank`` lists
each reporting rank's own rate (group rank order: under ``strategy=factored``, one per trainer).
The evaluation's metrics (``val_<m>``, ``test_<m>``) are the same on every rank and are not
reduced. The summary table shows the runner's columns, then the task's and the strategy's
(:func:`summary_columns`).
"""

from __future__ import annotations

import json
import resource
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from gnnscale.distributed import device as device_seam
from gnnscale.schema import Reduce
from gnnscale.strategies.config import declared
from gnnscale.tasks.config import declared_task

#: The figure the runner measures itself and adds to every rank's metrics.
RUNNER = {"peak_memory": Reduce.max}  # the largest rank's peak


def declared_reductions(cfg: Any, declarations: tuple[Any, Any] | None = None
                        ) -> dict[str, Reduce]:
    """How each metric of ``cfg``'s run reduces over ranks, as its strategy, its task and the
    runner declare (torch-free; ``declarations``: the strategy's and the task's, when read
    already, e.g. a run's plan's); two that declare one figure differently are a bug."""
    out = dict(RUNNER)
    for decl in declarations or (declared(cfg.strategy), declared_task(cfg)):
        for key, how in decl.metric_reductions().items():
            if out.get(key, how) != how:
                raise ValueError(f"{key} reduces by {out[key].value} elsewhere but by "
                                 f"{Reduce(how).value} in {decl.__name__}")
            out[key] = Reduce(how)
    return out


def summary_columns(cfg: Any, declarations: tuple[Any, Any] | None = None
                    ) -> tuple[str, ...]:
    """The summary table's columns for ``cfg``'s run: ``epoch``, ``train_loss``, the task's
    (validation loss and metrics), then the strategy's (``declarations``: the strategy's and
    the task's, when read already)."""
    strategy, task = declarations or (declared(cfg.strategy), declared_task(cfg))
    return ("epoch", "train_loss", *task.columns(), *strategy.summary_columns())


def peak_memory(device: torch.device) -> int:
    """Peak bytes of this process: the allocator's peak on a GPU, max RSS on the CPU."""
    peak = device_seam.peak_allocated(device)
    if peak is not None:
        return peak
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def reduction(key: str, declared: Mapping[str, str] | None = None) -> Reduce:
    """How metric ``key`` combines over ranks: as ``declared`` (:func:`declared_reductions`)
    says, else by its name (the mean for a ``*_time``, else the sum; module docstring)."""
    if declared is not None and key in declared:
        return Reduce(declared[key])
    return Reduce.mean if key.endswith("_time") else Reduce.sum


def reduce_over_ranks(local: dict[str, float], group: dist.ProcessGroup | None = None,
                      declared: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Combine the metrics of every rank of ``group`` (collective when a process group is up),
    each as ``declared`` (:func:`declared_reductions`) says."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) == 1:
        per_rank = [local]
    else:
        per_rank = [None] * dist.get_world_size(group)
        dist.all_gather_object(per_rank, local, group=group)
    out: dict[str, Any] = {}
    for key in local:
        values = [float(r[key]) for r in per_rank]
        how = reduction(key, declared)
        if how == Reduce.max:
            out[key] = max(values)
        elif how == Reduce.mean:
            out[key] = sum(values) / len(values)
        else:
            out[key] = sum(values)
    if "hits" in out and "misses" in out:
        total = out["hits"] + out["misses"]
        out["cache_hit_rate"] = out["hits"] / total if total else 0.0
        out["cache_hit_rate_per_rank"] = [_rate(r["hits"], r["hits"] + r["misses"])
                                          for r in per_rank]
    for tier in ("local", "host"):  # each memory tier's share of the rows, from the sums
        if f"{tier}_hits" in out and "requested" in out:
            out[f"{tier}_hit_rate"] = _rate(out[f"{tier}_hits"], out["requested"])
    if "disk_reads" in out:  # the disk tier's ratios from the sums; the device's rate is one
        out["rows_per_read"] = _rate(out["disk_rows"], out["disk_reads"])
        out["disk_rate"] = _rate(out["disk_rows"], out.get("requested", 0))
        out["disk_probe_reads_per_s"] = max(float(r.get("disk_probe_reads_per_s", 0.0))
                                            for r in per_rank)
        rows = [r for r in per_rank if r.get("disk_rows")]
        out["disk_bytes_per_row_byte"] = (sum(r["disk_bytes_per_row_byte"] * r["disk_rows"]
                                              for r in rows) / out["disk_rows"]
                                          if out["disk_rows"] else 0.0)
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


def summary_table(history: list[dict], columns: tuple[str, ...]) -> str:
    """A fixed-width table of ``columns`` (:func:`summary_columns`) that ``history`` has, one
    row per epoch."""
    cols = [c for c in columns if any(c in h for h in history)]
    rows = [[_fmt(h.get(c)) for c in cols] for h in history]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    line = lambda cells: "  ".join(x.rjust(w) for x, w in zip(cells, widths))
    return "\n".join([line(cols), line(["-" * w for w in widths])] + [line(r) for r in rows])
