"""Suite ``binding``: every strategy's epoch with its ranks bound to cores and unbound.

``dist.bind_cores=true`` (the default) gives each spawned rank its own block of free cores
(:mod:`gnnscale.distributed.threads`); ``false`` leaves the ranks to the scheduler, as before.
The workload is the roofline's (:mod:`benchmarks.roofline`: products-like graph, SAGE 2 x 64,
fanouts 10,10; node and link task; one thread per rank), every strategy on 2 ranks (each its
own core) plus ``data`` and ``fullgraph`` on 4 ranks (two ranks a core, round-robin). The two
variants of a row run back to back, their order alternating round by round, so a change in
the host's load falls on both; a row's figure is the median over rounds of each run's median
epoch after the first. Binding changes where a rank runs, never what it computes: the runs'
last training losses must be the same bits (``results.rows.<row>.same_loss``). A bound
variant's runs say whether the launcher did bind them (``applied``: it binds only onto free
cores, so a busy host runs both variants unbound).

``results.waits``: the mechanism alone, on 2 and on 4 ranks: each rank repeats the same small
computation (eight 256 x 256 products) and a one-row all-to-all, bound
(``spawn(cores="auto")``) and unbound, alternating; the seconds spent in the all-to-all are
waits for the slowest peer (their sum, median and 90th percentile).
"""

from __future__ import annotations

import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import compose_run, ratio
from benchmarks.roofline import STRATEGIES, TASKS, overrides
from benchmarks.roofline import settings as roofline_settings

#: rows run on 4 ranks as well: more ranks than the 2-core host's cores
FOUR_RANKS = (("data", None), ("fullgraph", "depcomm"))


def settings(quick: bool) -> dict:
    """The roofline's workload; 3 rounds of 6 epochs (quick: the node task, 2 rounds of 4)."""
    cfg = roofline_settings(quick)
    cfg.update(epochs=4 if quick else 6, rounds=2 if quick else 3,
               tasks=["node"] if quick else list(TASKS))
    return cfg


def rows_of(cfg: dict) -> list[tuple[str, str, str | None, int]]:
    """``(task, strategy, deps, ranks)`` of every row."""
    rows = [(t, s, d, cfg["ranks"]) for t in cfg["tasks"] for s, d in STRATEGIES]
    return rows + [("node", s, d, 4) for s, d in FOUR_RANKS]


def name_of(task: str, strategy: str, deps: str | None, ranks: int) -> str:
    return f"{task}/{strategy}" + (f"/{deps}" if deps else "") + f"/{ranks}ranks"


def measure(tmp: Path, cfg: dict, task: str, strategy: str, deps: str | None, ranks: int,
            bind: bool) -> dict[str, Any]:
    """One run: its median epoch after the first, median comm seconds, last training loss."""
    from gnnscale.compare.runs import load_run
    from gnnscale.distributed.threads import host_load
    from gnnscale.runner.run import run

    busy, free = host_load()  # what the launcher will see: bound only onto free cores
    folder = tmp / f"{name_of(task, strategy, deps, ranks).replace('/', '-')}-{bind}"
    ov = overrides({**cfg, "ranks": ranks}, strategy, deps, task)
    run(compose_run(ov + [f"dist.bind_cores={str(bind).lower()}"], folder, tmp / "data"))
    done = load_run(folder)
    history = done.history
    later = history[1:] or history
    return {"epoch_s": statistics.median(float(h["epoch_time"]) for h in later),
            "comm_s": statistics.median(float(h.get("comm_time", 0.0)) for h in later),
            "train_loss": float(history[-1]["train_loss"]), "busy_cores_before": busy,
            "rank0_cores": done.summary.get("rank0_cores"),
            "free_cores_before": len(free)}


def _wait_rank(topo, iterations: int) -> list[float]:
    """Seconds of each all-to-all after the same small computation on every rank."""
    import time

    import torch
    import torch.distributed as dist

    a = torch.randn(256, 256)
    send = torch.randn(topo.world_size * 10, 64)
    recv = torch.empty_like(send)
    waits = []
    for _ in range(iterations):
        for _ in range(8):
            a @ a
        t0 = time.perf_counter()
        dist.all_to_all_single(recv, send)
        waits.append(time.perf_counter() - t0)
    return waits


def waits(iterations: int, rounds: int) -> dict[str, Any]:
    """:func:`_wait_rank` on 2 and 4 ranks of one thread, bound and unbound, alternating."""
    from gnnscale.distributed import spawn

    out: dict[str, Any] = {}
    for world in (2, 4):
        got: dict[str, list[list[float]]] = {"bound": [], "unbound": []}
        for rnd in range(rounds):
            for bind in ((True, False) if rnd % 2 == 0 else (False, True)):
                ranks = spawn(_wait_rank, world, iterations, threads_per_rank=1,
                              cores="auto" if bind else None, timeout_s=600.0)
                got["bound" if bind else "unbound"].append(ranks[0])
        row = {}
        for variant, runs in got.items():
            sums = [sum(w) for w in runs]
            flat = sorted(x for w in runs for x in w)
            row[variant] = {"wait_sum_s": statistics.median(sums), "wait_sum_s_runs": sums,
                            "median_us": 1e6 * flat[len(flat) // 2],
                            "p90_us": 1e6 * flat[int(0.9 * len(flat))]}
        row["unbound_over_bound"] = ratio(row["unbound"]["wait_sum_s"],
                                          row["bound"]["wait_sum_s"])
        out[f"{world}ranks"] = row
    return out


def run(quick: bool = False) -> dict:
    cfg = settings(quick)
    runs: dict[str, dict[str, list[dict]]] = {}
    load_before = os.getloadavg()
    mechanism = waits(150 if quick else 300, 2 if quick else 3)
    with tempfile.TemporaryDirectory() as d:
        for rnd in range(cfg["rounds"]):
            for i, (task, strategy, deps, ranks) in enumerate(rows_of(cfg)):
                row = runs.setdefault(name_of(task, strategy, deps, ranks),
                                      {"bound": [], "unbound": []})
                order = (True, False) if (rnd + i) % 2 == 0 else (False, True)
                for bind in order:
                    row["bound" if bind else "unbound"].append(
                        measure(Path(d), cfg, task, strategy, deps, ranks, bind))
    results: dict[str, Any] = {"rows": {}, "waits": mechanism,
                               "load_average_before": load_before,
                               "load_average_after": os.getloadavg()}
    gain = {}
    allowed = len(os.sched_getaffinity(0))
    for key, row in runs.items():
        out = {}
        for variant, got in row.items():
            out[variant] = {"epoch_s": statistics.median(g["epoch_s"] for g in got),
                            "epoch_s_runs": [g["epoch_s"] for g in got],
                            "comm_s": statistics.median(g["comm_s"] for g in got),
                            "train_loss": got[-1]["train_loss"],
                            "busy_cores_before": [g["busy_cores_before"] for g in got],
                            "rank0_cores": [g["rank0_cores"] for g in got],
                            # bound: rank 0 ran on fewer cores than the host allows
                            "applied": [bool(g["rank0_cores"]) and len(g["rank0_cores"]) < allowed
                                        for g in got]}
        out["same_loss"] = all(b["train_loss"] == u["train_loss"]
                               for b, u in zip(row["bound"], row["unbound"]))
        results["rows"][key] = out
        gain[key] = ratio(out["unbound"]["epoch_s"], out["bound"]["epoch_s"])
    values = sorted(v for v in gain.values() if v is not None)
    return {"config": cfg, "results": results,
            "ratios": {"unbound_over_bound": gain, "median": statistics.median(values),
                       "min": values[0], "max": values[-1],
                       "rows_slower_bound": sorted(k for k, v in gain.items() if v < 1.0),
                       "waits_unbound_over_bound": {k: v["unbound_over_bound"]
                                                    for k, v in mechanism.items()},
                       "all_same_loss": all(r["same_loss"] for r in results["rows"].values())}}
