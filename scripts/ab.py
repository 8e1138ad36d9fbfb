"""Two checkouts side by side: the sampler and the data-parallel epoch, alternated run by run.

``python scripts/ab.py BASE_DIR NEW_DIR [--rounds N] [--scale S] [--out PATH.json]`` runs,
``--rounds`` times and alternating (base, new, base, new, ...), each checkout's own code in a
fresh process (``PYTHONPATH`` = the checkout): the sampler workload of ``benchmarks.sampler``
(products-like graph, fanouts 15,10,5, batches of 1024; sampled edges per second with 1 and
with all threads, median over repeats) and the ``epoch`` suite's gnnscale run (GraphSAGE 3 x
256, 2 ranks, ``strategy=data``; the median epoch after the first). It writes each round's
figures, the medians per checkout, new/base ratios of the medians and the median of each round's
paired new/base ratio: how a change moves the homogeneous path
on the same host, with the host's load before and after. Both checkouts need their native
extension built.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SAMPLER = """
import json, statistics, sys, time, torch
from benchmarks.sampler import _batches, products_like
from gnnscale.sampling.neighbor import NeighborSampler
graph = products_like({scale})
batches = _batches(graph, 30)
out = {{}}
for threads in (1, torch.get_num_threads()):
    s = NeighborSampler([15, 10, 5], threads=threads)
    for b in batches[:3]:
        s.sample(graph, b, 0)
    rates = []
    for r in range(5):
        t0, edges = time.perf_counter(), 0
        for i, b in enumerate(batches):
            edges += s.sample(graph, b, i + 100 * r).num_edges
        rates.append(edges / (time.perf_counter() - t0))
    out[f"edges_per_s_{{threads}}t"] = statistics.median(rates)
print("RESULT " + json.dumps(out))
"""

EPOCH = """
import json, statistics
from pathlib import Path
from benchmarks.epoch import _gnnscale
res = _gnnscale(Path({tmp!r}), {scale}, 4, 1024, 256)
hist = res["history"][1:]
print("RESULT " + json.dumps({{"epoch_s": statistics.median(h["epoch_time"] for h in hist),
                               "sample_s": statistics.median(h["sample_time"] for h in hist),
                               "edges_computed": hist[-1]["edges_computed"]}}))
"""


def _one(tree: Path, code: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True,
                         text=True, timeout=3600)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{tree}: no result\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")


def main(argv: list[str] | None = None) -> int:
    """Run the alternation, print the table, write the JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("base", type=Path)
    p.add_argument("new", type=Path)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--scale", type=float, default=0.1, help="sampler graph scale")
    p.add_argument("--epoch-scale", type=float, default=0.03)
    p.add_argument("--parts", default="sampler,epoch", help="which workloads (comma list)")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    rounds: list[dict] = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, tree in (("base", args.base), ("new", args.new)):
                d = Path(tmp) / f"{name}{r}"
                parts = args.parts.split(",")
                figures = {}
                if "sampler" in parts:
                    figures.update(_one(tree.resolve(), SAMPLER.format(scale=args.scale)))
                if "epoch" in parts:
                    figures.update(_one(tree.resolve(),
                                        EPOCH.format(tmp=str(d), scale=args.epoch_scale)))
                rounds.append({"round": r, "tree": name, **figures})
                print(json.dumps(rounds[-1]), flush=True)
    keys = [k for k in rounds[0] if k not in ("round", "tree")]
    med = {name: {k: statistics.median(x[k] for x in rounds if x["tree"] == name) for k in keys}
           for name in ("base", "new")}
    ratios = {k: med["new"][k] / med["base"][k] for k in keys if med["base"][k]}
    by_round = {r["round"]: {} for r in rounds}  # paired: each round's new over its base
    for r in rounds:
        by_round[r["round"]][r["tree"]] = r
    paired = {k: statistics.median(x["new"][k] / x["base"][k] for x in by_round.values()
                                   if x["base"][k]) for k in keys}
    report = {"suite": "ab", "config": {"base": str(args.base), "new": str(args.new),
                                        "rounds": args.rounds, "parts": args.parts,
                                        "sampler_scale": args.scale,
                                        "epoch_scale": args.epoch_scale},
              "results": {"rounds": rounds, "median": med,
                          "load_average_before": load_before,
                          "load_average_after": os.getloadavg()},
              "ratios": {"new_over_base": ratios, "paired_median_new_over_base": paired}}
    print(json.dumps(report["ratios"], indent=1))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
