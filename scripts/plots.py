#!/usr/bin/env python
"""Draw the docs' figures from benchmark JSON: ``python scripts/plots.py [RESULTS_DIR] [OUT_DIR]``.

Reads ``<suite>.json`` files written by ``scripts/bench.py SUITE --out RESULTS_DIR/<suite>.json``
(default docs/results) and writes PNGs to OUT_DIR (default docs/img). Suites without a file are
skipped. ``accuracy.json`` (``scripts/summarize.py --out``) is drawn against the published figures.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _load(results: Path, suite: str) -> dict | None:
    path = results / f"{suite}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def cache(rep: dict, out: Path) -> None:
    graphs = {g: v for g, v in rep["results"].items() if g != "placement"}
    fig, axes = plt.subplots(1, len(graphs), figsize=(5 * len(graphs), 3.6), squeeze=False)
    for ax, (graph, policies) in zip(axes[0], graphs.items()):
        for policy, by_ratio in policies.items():
            if not isinstance(by_ratio, dict):
                continue
            pts = sorted((float(r), v["hit_rate"]) for r, v in by_ratio.items()
                         if isinstance(v, dict) and "hit_rate" in v)
            ax.plot([100 * r for r, _ in pts], [h for _, h in pts], marker="o", label=policy)
        ax.set(title=graph, xlabel="cache size (% of vertices)", ylabel="hit rate", ylim=(0, 1))
        ax.grid(alpha=0.3)
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(out / "cache_hit_rates.png", dpi=110)


def partition(rep: dict, out: Path) -> None:
    res = rep["results"]
    names = sorted(res)
    parts = sorted({p for n in names for p in res[n]}, key=int)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    width = 0.8 / len(parts)
    for i, p in enumerate(parts):
        xs = [k + i * width for k in range(len(names))]
        axes[0].bar(xs, [res[n].get(p, {}).get("local_edge_ratio", 0) for n in names], width,
                    label=f"{p} parts")
        axes[1].bar(xs, [res[n].get(p, {}).get("replication_factor", 0) for n in names], width,
                    label=f"{p} parts")
    for ax, title in zip(axes, ("local-edge ratio", "replication factor")):
        ax.set_xticks([k + 0.4 - width / 2 for k in range(len(names))], names, rotation=30)
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(out / "partition_quality.png", dpi=110)


def epoch(rep: dict, out: Path) -> None:
    r = rep["results"]
    parts = ["sample", "load", "compute", "comm"]
    vals = [r.get(f"gnnscale_{p}_s") or 0 for p in parts]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.barh(parts, vals)
    ax.axvline(r["gnnscale_epoch_s"], color="k", ls="--", label="epoch (wall)")
    if r.get("pyg_epoch_s"):
        ax.axvline(r["pyg_epoch_s"], color="r", ls=":", label="PyG reference epoch")
    ax.set(xlabel="seconds per epoch (per-rank mean; sampling overlaps compute)",
           title="strategy=data, 2 ranks")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "epoch_breakdown.png", dpi=110)


def sampler(rep: dict, out: Path) -> None:
    r = rep["results"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    labels = ["gnnscale", "PyG NeighborLoader"]
    axes[0].bar(labels, [r.get("gnnscale_edges_per_s") or 0, r.get("pyg_edges_per_s") or 0])
    axes[0].set_title("sampled edges / s")
    gb = [("native gather", r.get("gather_gb_per_s")),
          ("index_select", r.get("index_select_gb_per_s")),
          ("contiguous copy", r.get("copy_gb_per_s"))]
    axes[1].bar([k for k, _ in gb], [v or 0 for _, v in gb])
    axes[1].set_title("feature rows, GB/s written")
    for ax in axes:
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "sampler.png", dpi=110)


def split(rep: dict, out: Path) -> None:
    r = rep["results"]
    batches = [k for k in r["redundancy_pct"]]
    vols = r["volumes"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
    xs = range(len(batches))
    key0 = [next(k for k in vols if k.startswith(b + "/")) for b in batches]
    axes[0].bar([x - 0.2 for x in xs], [vols[k]["edges_data"] / 1e6 for k in key0], 0.4,
                label="data (4 micro-batches)")
    axes[0].bar([x + 0.2 for x in xs], [vols[k]["edges_split"] / 1e6 for k in key0], 0.4,
                label="split (1 mini-batch)")
    axes[0].set(title="edges computed (M, 4 steps)", xticks=list(xs), xticklabels=batches)
    keys = sorted(vols)
    axes[1].bar([x - 0.2 for x in range(len(keys))],
                [vols[k]["bytes_host_data_best"] / 1e6 for k in keys], 0.4, label="data (best)")
    axes[1].bar([x + 0.2 for x in range(len(keys))],
                [vols[k]["bytes_host_split"] / 1e6 for k in keys], 0.4, label="split")
    axes[1].set(title="host -> rank MB (4 steps)", xticks=list(range(len(keys))),
                xticklabels=keys)
    st = {k: v for k, v in r["step_time_s"].items() if not k.endswith("replicated_rows")}
    variants = sorted({k.split("/b")[0] for k in st})
    for i, v in enumerate(variants):
        axes[2].bar([x + 0.8 * i / len(variants) - 0.3 for x in xs],
                    [st.get(f"{v}/{k.split('/')[0]}/r{max(rep['config']['ratios'])}", 0)
                     for k in key0], 0.8 / len(variants), label=v)
    axes[2].set(title="step time (s), 25% cache", xticks=list(xs), xticklabels=batches)
    for ax in axes:
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "split.png", dpi=110)


def fullgraph(rep: dict, out: Path) -> None:
    """Epoch time and bytes per row and deps option (edge-cut rows: depcache/depcomm/hybrid)."""
    rows = rep["results"]["rows"]
    keys = [k for k in rows if "hybrid" in rows[k]]
    deps = ("depcache", "depcomm", "hybrid")
    fig, axes = plt.subplots(1, 2, figsize=(13, 3.8))
    xs = range(len(keys))
    for i, d in enumerate(deps):
        off = [x + 0.27 * (i - 1) for x in xs]
        axes[0].bar(off, [rows[k][d]["epoch_s"] for k in keys], 0.27, label=d)
        axes[1].bar(off, [(rows[k][d]["bytes_forward"] + rows[k][d]["bytes_backward"]) / 1e6
                          for k in keys], 0.27, label=d)
    axes[0].set(title="epoch time (s, slowest of 4 ranks)")
    axes[1].set(title="bytes sent per epoch (MB, all ranks)", yscale="symlog")
    for ax in axes:
        ax.set_xticks(list(xs))
        ax.set_xticklabels([k.replace("/", "\n", 1) for k in keys], fontsize=6, rotation=60)
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "fullgraph.png", dpi=110)


def factored(rep: dict, out: Path) -> None:
    """Epoch time per row (data, fixed allocations, auto) for each sampler, and PreSC against
    the oracle for random-walk sampling."""
    rows = rep["results"]["rows"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    names = [k for k in next(iter(rows.values())) if isinstance(rows[next(iter(rows))][k], dict)]
    width = 0.8 / len(rows)
    for i, (sampler, by_row) in enumerate(rows.items()):
        xs = [k + i * width for k in range(len(names))]
        axes[0].bar(xs, [by_row[n]["epoch_s"] for n in names], width, label=sampler)
    axes[0].set_xticks([k + 0.4 - width / 2 for k in range(len(names))], names, rotation=20)
    axes[0].set(title=f"epoch time (s), {rep['config']['ranks']} ranks, "
                      f"{rep['config']['dataset']}")
    axes[0].legend()
    presc = rep["results"].get("presc_vs_oracle_random_walk")
    if presc:
        for policy, by_ratio in presc["hit_rate"].items():
            pts = sorted((float(r), h) for r, h in by_ratio.items())
            axes[1].plot([100 * r for r, _ in pts], [h for _, h in pts], marker="o", label=policy)
        axes[1].set(title=f"hit rate, random-walk sampling ({presc['graph']})",
                    xlabel="cache size (% of vertices)", ylim=(0, 1))
        axes[1].legend()
    for ax in axes:
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "factored.png", dpi=110)


# Published figure and the band, by the summary group's name up to the strategy: the
# experiments as they stand (Shchur et al.'s draw a split per seed) and Kipf & Welling's own
# stopping rule; earlier protocols (one split for every seed) stay in docs/accuracy.md's table.
PUBLISHED = {
    "Cora (row-normalised features) / GCN": ("Cora", 81.5, 1.0),
    "Cora (row-normalised features) / GCN, select=last": ("Cora,\nK&W stopping", 81.5, 1.0),
    "CiteSeer (row-normalised features) / GCN": ("CiteSeer", 70.3, 1.0),
    "CiteSeer (row-normalised features) / GCN, select=last":
        ("CiteSeer,\nK&W stopping", 70.3, 1.0),
    "PubMed (row-normalised features) / GCN": ("PubMed", 79.0, 1.0),
    "PubMed (row-normalised features) / GCN, select=last": ("PubMed,\nK&W stopping", 79.0, 1.0),
    "photo (split per seed) (largest component) / GCN, select=loss": ("Photo", 91.2, 1.5),
    "computers (split per seed) (largest component) / GCN, select=loss":
        ("Computers", 82.6, 1.5),
    "cs (split per seed) (largest component) / GCN, select=loss": ("CS", 91.1, 1.5),
    "physics (split per seed) (largest component) / GCN, select=loss": ("Physics", 92.8, 1.5),
    "tolokers / GCN (residual)": ("Tolokers GCN\n(ROC-AUC)", 83.64, 1.5),
    "tolokers / SAGE (residual)": ("Tolokers SAGE\n(ROC-AUC)", 82.43, 1.5),
    "Cora (link prediction) / GCN, select=last": ("Cora GAE\n(link AUC)", 91.0, 1.5),
    "CiteSeer (link prediction) / GCN, select=last": ("CiteSeer GAE\n(link AUC)", 89.5, 1.5),
    "PubMed (link prediction) / GCN, select=last": ("PubMed GAE\n(link AUC)", 96.4, 1.5),
}


def accuracy_points(rows: list[dict]) -> dict[str, dict[str, tuple[float, float, int]]]:
    """``{dataset label: {column: (mean - published, std, seeds)}}`` for the PUBLISHED groups."""
    points: dict[str, dict[str, tuple[float, float, int]]] = {}
    for row in rows:
        prefix, strategy, ranks = row["group"].rsplit(" / ", 2)
        if prefix not in PUBLISHED:
            continue
        label, published, _ = PUBLISHED[prefix]
        n = ranks.split()[0]
        column = f"{n} rank{'' if n == '1' else 's'} {strategy.lower().replace('parallel', '')}"
        points.setdefault(label, {})[column] = (row["mean"] - published, row["std"], row["seeds"])
    return points


def accuracy(rows: list[dict], out: Path) -> None:
    """gnnscale minus the published figure per experiment and column, the band shaded."""
    points = accuracy_points(rows)
    labels = [lab for lab, _, _ in PUBLISHED.values() if lab in points]
    order = ("data", "split", "fullgraph", "factored", "offload")
    columns = sorted({c for v in points.values() for c in v}, key=lambda c: (
        int(c.split()[0]), order.index(c.split()[-1]) if c.split()[-1] in order else len(order)))
    bands = {lab: band for lab, _, band in PUBLISHED.values()}
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(labels)), 4.6))
    width = 0.8 / max(1, len(columns))
    for k, lab in enumerate(labels):
        ax.fill_between([k - 0.45, k + 0.45], -bands[lab], bands[lab], color="0.9", zorder=0)
    for i, col in enumerate(columns):
        ks = [k for k, lab in enumerate(labels) if col in points[lab]]
        vals = [points[labels[k]][col] for k in ks]
        ax.errorbar([k - 0.4 + (i + 0.5) * width for k in ks], [v[0] for v in vals],
                    yerr=[v[1] for v in vals], fmt="o", capsize=3, label=col)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel("gnnscale - published (points)")
    ax.set_title("test metric at the selected epoch, mean +- std over seeds; grey: the target band")
    ax.legend(fontsize=8, ncol=len(columns), loc="upper center", bbox_to_anchor=(0.5, -0.14))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "accuracy.png", dpi=110)


def roofline(rep: dict, out: Path) -> None:
    """Each strategy's epoch over its bound (log scale, the 1.5x target dashed) and where its
    measured epoch goes (the run's phases as shares of the epoch)."""
    rows = rep["results"]["rows"]
    keys = list(rows)[::-1]  # first row on top
    phases = ("sample_time", "load_time", "compute_time", "comm_time")
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 0.32 * len(keys) + 1.6), sharey=True)
    colours = ["0.35" if k.startswith("node/") else "tab:olive" for k in keys]
    ax.barh(keys, [rows[k]["ratio"] for k in keys], color=colours)
    ax.axvline(1.5, color="k", ls="--", lw=1, label="target 1.5x")
    ax.axvline(1.0, color="0.5", lw=0.8)
    ax.set_xscale("log")
    ticks = [t for t in (0.5, 1, 1.5, 2, 4, 8, 16, 32)
             if t <= 1.2 * max(rows[k]["ratio"] for k in keys)]
    ax.set_xticks(ticks, [f"{t:g}x" for t in ticks])
    ax.minorticks_off()
    ax.set(xlabel="measured epoch / bound (grey: node task, olive: link)")
    ax.legend(fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    left = [0.0] * len(keys)
    for ph in (*phases, "other"):
        shares = []
        for k in keys:
            r = rows[k]
            part = (max(r["epoch_s"] - sum(r["phases"].get(p, 0.0) for p in phases), 0.0)
                    if ph == "other" else r["phases"].get(ph, 0.0))
            shares.append(part / r["epoch_s"])
        bx.barh(keys, shares, left=left, label=ph.replace("_time", ""))
        left = [a + b for a, b in zip(left, shares)]
    bx.set(xlabel="share of the measured epoch (per-rank means; phases may overlap)")
    bx.legend(fontsize=8, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.12))
    load = rep["results"].get("load_average_before", [None])[0]
    fig.suptitle(f"roofline, {rep['config']['ranks']} ranks x {rep['config']['threads']} thread"
                 + (f" (load average {load:.1f} at the start)" if load is not None else ""),
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "roofline.png", dpi=110)


def binding(rep: dict, out: Path) -> None:
    """Each row's epoch unbound over bound (``dist.bind_cores``): above 1, binding is faster."""
    gains = rep["ratios"]["unbound_over_bound"]
    keys = list(gains)[::-1]  # first row on top
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(keys) + 1.4))
    colours = ["0.35" if k.startswith("node/") else "tab:olive" for k in keys]
    ax.barh(keys, [gains[k] for k in keys], color=colours)
    ax.axvline(1.0, color="k", lw=1)
    ax.set(xlabel="epoch unbound / epoch bound (grey: node task, olive: link)")
    ax.grid(axis="x", alpha=0.3)
    fig.suptitle("ranks bound to cores (dist.bind_cores), medians of alternating runs",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "binding.png", dpi=110)


def main(argv: list[str]) -> int:
    results = Path(argv[0]) if argv else ROOT / "docs" / "results"
    out = Path(argv[1]) if len(argv) > 1 else ROOT / "docs" / "img"
    out.mkdir(parents=True, exist_ok=True)
    for suite, draw in (("cache", cache), ("partition", partition), ("epoch", epoch),
                        ("sampler", sampler), ("split", split), ("fullgraph", fullgraph),
                        ("factored", factored), ("roofline", roofline),
                        ("binding", binding)):
        rep = _load(results, suite)
        # fall back to the quick size
        if rep is None and suite in ("fullgraph", "factored", "roofline"):
            rep = _load(results, f"{suite}-quick")
        if rep is None:
            print(f"skip {suite}: no {results / (suite + '.json')}")
            continue
        draw(rep, out)
        print(f"{suite}: drawn")
    if (results / "accuracy.json").is_file():
        accuracy(json.loads((results / "accuracy.json").read_text()), out)
        print("accuracy: drawn")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
