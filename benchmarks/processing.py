"""Suite ``processing``: peak memory of processing a custom ``.npz`` into the processed layout.

Writes a custom ``.npz`` (float32 features ``[N, F]``, random edges, labels) and processes it
in a child process each way, reading the child's peak resident memory (``VmHWM``, which
counts the mapped file pages it touches) and its anonymous part at the end:

* ``in_memory``: every array read whole, the graph built in memory and saved (the
  processing before :mod:`gnnscale.data.bounded`; same checksum);
* ``bounded``: ``Dataset.load`` as it is: features streamed into the staged ``.npy``;
* ``budget``: the same with ``dataset.memory_budget`` (the CSC built out of core).

Quick: 200,000 x 400 (320 MB of features), 2M edges; full: 200,000 x 4,000 (3.2 GB, the
issue's example; ``in_memory`` left out there, it needs ~3x the features).
``ratios.<way>_over_features``: peak above the interpreter's own, over the feature matrix.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CHILD = r"""
import json, sys, time
from pathlib import Path
way, path, root, budget = sys.argv[1:5]
from gnnscale.data import processed
from gnnscale.data.base import normalize_features
from gnnscale.data.custom import CustomDataset, graph_from_arrays, read_npz
def status(key):
    return int([l for l in open("/proc/self/status") if l.startswith(key)][0].split()[1]) * 1024
base = status("VmRSS")
t0 = time.perf_counter()
ds = CustomDataset(root=root, path=path, memory_budget=budget or None)
if way == "in_memory":
    g = graph_from_arrays(read_npz(Path(path)), ds.path, True, 0.6, 0.2, 0)
    g = normalize_features(g, "none")
    ds.check(g)
    digest = processed.save(g, ds.processed_dir, share=ds.root)
else:
    ds.load()
    digest = json.loads((ds.processed_dir / "meta.json").read_text())["checksum"]
print(json.dumps({"peak_bytes": status("VmHWM"), "base_bytes": base, "checksum": digest,
                  "time_s": time.perf_counter() - t0}))
"""


def _child(way: str, npz: Path, root: Path, budget: str) -> dict:
    shutil.rmtree(root, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    out = subprocess.run([sys.executable, "-c", CHILD, way, str(npz), str(root), budget],
                         capture_output=True, text=True, env=env, check=True)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    shutil.rmtree(root, ignore_errors=True)
    return row


def run(quick: bool = False) -> dict:
    n, f, e = (200_000, 400, 2_000_000) if quick else (200_000, 4_000, 2_000_000)
    folder = Path(tempfile.mkdtemp(prefix="gnnscale-processing-"))
    try:
        npz = folder / "big.npz"
        rng = np.random.default_rng(0)
        x = np.empty((n, f), dtype=np.float32)
        for a in range(0, n, 10_000):
            x[a:a + 10_000] = rng.random((min(10_000, n - a), f), dtype=np.float32)
        t0 = time.perf_counter()
        np.savez(npz, x=x, edge_index=rng.integers(0, n, (2, e)), y=rng.integers(0, 10, n))
        write_s = time.perf_counter() - t0
        feature_bytes = x.nbytes
        del x
        ways = {"bounded": "", "budget": "256MiB"}
        if quick:
            ways = {"in_memory": "", **ways}
        results = {way: _child(way, npz, folder / way, budget) for way, budget in ways.items()}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for row in results.values():
        row["peak_gib"] = row["peak_bytes"] / 2**30
        row["above_base_gib"] = (row["peak_bytes"] - row["base_bytes"]) / 2**30
    ratios = {f"{way}_over_features": (r["peak_bytes"] - r["base_bytes"]) / feature_bytes
              for way, r in results.items()}
    sums = {r["checksum"] for r in results.values()}
    targets = {"same_checksum": len(sums) == 1,
               "bounded_le_1.25x_features": ratios["bounded_over_features"] <= 1.25,
               "budget_le_1.25x_features": ratios["budget_over_features"] <= 1.25}
    config = {"num_nodes": n, "num_features": f, "num_edges": e, "feature_bytes": feature_bytes,
              "memory_budget": "256MiB", "npz_write_s": write_s}
    return {"config": config, "results": results, "ratios": ratios, "targets": targets}
