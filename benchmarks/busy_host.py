"""Suite ``busy_host``: every strategy's epoch on a host where another process keeps a core busy,
before and after the busy-host defaults (gnnscale/distributed/threads.py), against one thread
per rank.

Workload: Cora (needs its raw files, as the ``startup`` suite), GCN, one rank trained by
``train.py``: ``data``, ``split``, ``factored`` on the node task, ``fullgraph`` and ``offload``
with the graph's own degrees, and ``experiment=cora_gae`` (the issue's case: ``fullgraph`` on
the link task); ``EPOCHS`` epochs, evaluated once at the end. A spinning process the suite
starts (and stops) keeps one core busy for the whole suite (``benchmarks.sampler.busy_core``),
on top of whatever else the host runs. Variants, alternated run by run in one sweep so that
each sees the same machine:

* ``before``: what a run got before: libgomp's default wait (``GOMP_SPINCOUNT=300000``, its
  value when no wait policy is set: a waiting thread spins ~3 ms) and ``cores / ranks``
  threads (``dist.threads_per_rank`` set to it);
* ``wait_policy_only``: the passive wait with ``cores / ranks`` threads (the default before
  the thread count followed the free cores);
* ``after``: the defaults now (``OMP_WAIT_POLICY=PASSIVE``, and ``dist.threads_per_rank=0``:
  the allowed cores less those other processes keep busy, shared by the ranks);
* ``one_thread``: ``dist.threads_per_rank=1``.

(``docs/results/busy_host-free-cores.json`` is this suite at an earlier default that cut the
threads to the free cores with the spinning wait still on.)

Per run the epoch is ``startup.epochs / EPOCHS`` from its ``results.json`` (the epochs' own
seconds, no start-up); medians over the repeats; ``ratios.<row>.<variant>_over_one_thread``
(> 1: slower than one thread). The final training loss of every run is recorded beside.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.sampler import busy_core
from benchmarks.startup import cora_raw

ROOT = Path(__file__).resolve().parents[1]
EPOCHS = 20
COMMON = ["dataset=cora", "model=gcn", "eval_every=0", "checkpoint=false", "progress=false",
          "logger=none", "dist.world_size=1"]
ROWS = {
    "data": ["strategy=data"],
    "split": ["strategy=split", "deps=depcomm"],
    "factored": ["strategy=factored"],
    "fullgraph": ["strategy=fullgraph", "model.gcn_norm=graph"],
    "offload": ["strategy=offload", "model.gcn_norm=graph"],
    "cora_gae": ["experiment=cora_gae"],
}
QUICK_ROWS = ("data", "cora_gae")
SPIN = {"GOMP_SPINCOUNT": "300000"}  # libgomp's spin count when no wait policy is set


def variants() -> dict[str, tuple[dict, list[str]]]:
    """Variant -> (environment changes, overrides), as the module docstring says."""
    cores = os.cpu_count() or 1
    return {"before": (SPIN, [f"dist.threads_per_rank={cores}"]),
            "wait_policy_only": ({}, [f"dist.threads_per_rank={cores}"]),
            "after": ({}, []),
            "one_thread": ({}, ["dist.threads_per_rank=1"])}


def _env(changes: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
                                                            "OMP_NUM_THREADS")}
    return {**env, **changes, "PYTHONPATH": str(ROOT)}


def one_run(overrides: list[str], changes: dict, work: Path, data_root: Path,
            epochs: int = EPOCHS) -> dict:
    """One ``train.py`` run: seconds per epoch and the last training loss."""
    run_dir = Path(tempfile.mkdtemp(dir=work, prefix="run-"))
    cmd = [sys.executable, str(ROOT / "train.py"), *COMMON, f"epochs={epochs}", *overrides,
           f"data_root={data_root}", f"hydra.run.dir={run_dir}"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=_env(changes),
                          timeout=1200)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    res = json.loads((run_dir / "results.json").read_text())
    shutil.rmtree(run_dir, ignore_errors=True)
    epochs = len(res["history"])
    return {"epoch_s": res["startup"]["epochs"] / epochs, "epochs": epochs,
            "train_loss": res["history"][-1]["train_loss"]}


def run(quick: bool = False) -> dict:
    raw = cora_raw()
    if raw is None:
        return {"config": {}, "results": {"skipped": "Cora's raw files are not here (put "
                                          "ind.cora.* in data/cora/raw)"}, "ratios": {}}
    repeats = 1  # a run costs ~1 min of start-up on a loaded 2-core host; rows x variants
    rows = {k: v for k, v in ROWS.items() if not quick or k in QUICK_ROWS}
    var = variants()
    work = Path(tempfile.mkdtemp(prefix="gnnscale-busy-"))
    load = {"before": os.getloadavg()}
    try:
        data_root = work / "data"
        shutil.copytree(raw, data_root / "cora" / "raw")
        for warm in ([], ["experiment=cora_gae"]):  # process Cora (and its edge split) untimed
            one_run(warm, {}, work, data_root, epochs=1)
        runs: dict[str, dict[str, list[dict]]] = {r: {v: [] for v in var} for r in rows}
        t0 = time.monotonic()
        with busy_core():
            for rep in range(repeats):
                for row, overrides in rows.items():
                    order = list(var) if rep % 2 == 0 else list(reversed(var))
                    for name in order:
                        changes, more = var[name]
                        runs[row][name].append(one_run([*overrides, *more], changes, work,
                                                       data_root))
        load["after"] = os.getloadavg()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = {row: {name: {"epoch_s": statistics.median(r["epoch_s"] for r in rs),
                            "epoch_s_runs": [r["epoch_s"] for r in rs],
                            "train_loss": [r["train_loss"] for r in rs]}
                     for name, rs in per.items()} for row, per in runs.items()}
    ratios = {row: {f"{name}_over_one_thread": res[name]["epoch_s"] / res["one_thread"]["epoch_s"]
                    for name in res if name != "one_thread"}
              for row, res in results.items()}
    ratios["worst_after_over_one_thread"] = max(r["after_over_one_thread"]
                                               for k, r in ratios.items() if k in results)
    ratios["worst_before_over_one_thread"] = max(r["before_over_one_thread"]
                                                for k, r in ratios.items() if k in results)
    config = {"dataset": "cora", "model": "gcn", "epochs": EPOCHS, "repeats": repeats,
              "rows": rows, "variants": {k: {"env": v[0], "overrides": v[1]}
                                         for k, v in var.items()},
              "busy": "one spinning process for the whole suite", "loadavg": load,
              "seconds": time.monotonic() - t0}
    return {"config": config, "results": results, "ratios": ratios}
