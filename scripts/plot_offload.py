#!/usr/bin/env python
"""Draw the ``offload`` suite's figure: ``python scripts/plot_offload.py [JSON] [PNG]``.

Left: host-to-device rows per layer pass over |V| by dedup level and chunks (bars; first
level metis and random, reorganised hatched). Right: the planned device bound and the largest
subgraph's rows against chunks per part. Defaults: docs/results/offload.json ->
docs/img/offload.png.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEDUP = ("none", "inter", "inter+intra")


def draw(rep: dict, out: Path) -> None:
    res = rep["results"]
    vols = res["volumes"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
    groups = [(first, chunks, tag) for first in vols for chunks in vols[first]
              for tag in ("plain", "reorganized")]
    width = 0.8 / len(DEDUP)
    for i, dedup in enumerate(DEDUP):
        xs = [g + (i - 1) * width for g in range(len(groups))]
        ys = [vols[f][c][t][dedup]["h2d_rows_per_v"] for f, c, t in groups]
        bars = left.bar(xs, ys, width, label=f"dedup={dedup}", color=f"C{i}")
        for bar, (_, _, tag) in zip(bars, groups):
            if tag == "reorganized":
                bar.set_hatch("//")
    left.set_xticks(range(len(groups)))
    left.set_xticklabels([f"{f}\n{c} ch" + ("\nreorg" if t == "reorganized" else "")
                          for f, c, t in groups], fontsize=7)
    left.set(title="host-to-device rows per layer pass / |V| (4 ranks)", yscale="log")
    left.legend(fontsize=7)
    left.grid(axis="y", alpha=0.3)
    for first, bounds in res["bounds"].items():
        chunks = sorted(bounds, key=int)
        xs = [int(c) for c in chunks]
        right.plot(xs, [bounds[c]["bound_bytes"] / 1e6 for c in chunks], marker="o",
                   label=f"planned device bound ({first})")
        right.plot(xs, [bounds[c]["largest_subgraph_bytes"] / 1e6 for c in chunks], marker="s",
                   ls="--", label=f"largest subgraph's features ({first})")
    for name, row in res["epochs"].items():
        if "peak_device_bytes" in row:
            c = int(name.rsplit("/", 1)[-1])
            right.scatter([c], [row["peak_device_bytes"] / 1e6], marker="x", color="k",
                          zorder=3)
    right.scatter([], [], marker="x", color="k", label="measured peak (reorganised)")
    right.set(title="device memory per rank vs chunks per part (MB)", xscale="log",
              yscale="log", xlabel="chunks per part")
    right.set_xticks([1, 2, 4, 8, 16, 32], ["1", "2", "4", "8", "16", "32"])
    right.legend(fontsize=7)
    right.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv: list[str]) -> int:
    src = Path(argv[0]) if argv else ROOT / "docs" / "results" / "offload.json"
    out = Path(argv[1]) if len(argv) > 1 else ROOT / "docs" / "img" / "offload.png"
    if not src.is_file():
        print(f"no {src}: run python scripts/bench.py offload --out {src}")
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    draw(json.loads(src.read_text()), out)
    print(f"offload: drawn {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
