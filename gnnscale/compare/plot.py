"""The comparison figure: validation score over training time, epoch time (measured and, with
a hardware profile, modelled), bytes per tier and peak memory, one colour per run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gnnscale.compare.runs import Run
from gnnscale.compare.table import evaluated


def plot(runs: list[Run], doc: dict[str, Any], path: Path) -> Path | None:
    """Write the figure to ``path``; None (and nothing written) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = doc["rows"]
    labels = [r["label"] for r in rows]
    colours = [f"C{i % 10}" for i in range(len(rows))]
    fig, ax = plt.subplots(2, 2, figsize=(11, 7.5))
    a = ax[0][0]
    for run, c in zip(runs, colours):
        pts = evaluated(run)
        a.plot([p[1] for p in pts], [p[2][f"val_{run.metric}"] for p in pts], "o-", color=c,
               label=run.label)
    a.axhline(doc["target_val"], ls=":", color="grey", label="target")
    a.set(xlabel="training time (s, measured)", ylabel=f"val {rows[0]['metric']}",
          title="validation score over time")
    a.legend(fontsize=7)
    a = ax[0][1]
    x = range(len(rows))
    a.bar(x, [r["epoch_time_s"] for r in rows], color=colours, label="measured (this host)")
    if any(r.get("modelled_epoch_time_s") is not None for r in rows):
        b = a.twinx()
        b.bar([i + 0.3 for i in x], [r.get("modelled_epoch_time_s") or 0 for r in rows],
              width=0.3, color="white", edgecolor="black", hatch="//",
              label=f"modelled on {doc['hardware']}")
        b.set_ylabel(f"epoch s on {doc['hardware']} (modelled)")
        b.legend(fontsize=7, loc="upper right")
    a.set(ylabel="epoch s (median, measured)", title="epoch time")
    a.set_xticks(list(x), labels, rotation=20, ha="right", fontsize=7)
    a = ax[1][0]
    bottom = [0.0] * len(rows)
    for key, name in (("bytes_host_to_rank", "host->rank"), ("bytes_rank_to_rank", "rank->rank"),
                      ("bytes_allreduce", "all-reduce")):
        vals = [r[key] / 1e6 for r in rows]
        a.bar(x, vals, bottom=bottom, label=name)
        bottom = [s + v for s, v in zip(bottom, vals)]
    a.set(ylabel="MB per epoch", title="bytes moved per epoch")
    a.set_xticks(list(x), labels, rotation=20, ha="right", fontsize=7)
    a.legend(fontsize=7)
    a = ax[1][1]
    a.bar(x, [r["peak_memory_bytes"] / 2**20 for r in rows], color=colours)
    a.set(ylabel="MiB (largest rank)", title="peak memory")
    a.set_xticks(list(x), labels, rotation=20, ha="right", fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
