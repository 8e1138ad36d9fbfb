"""Suite ``factored``: GNNLab's factored design against data parallelism at equal ranks.

Workload: products-like synthetic graph (``quick``: scale 0.01, else 0.1), GraphSAGE 3 layers,
hidden 256, fanouts 15,10,5, global batch 1024, ``WORLD`` ranks, through the real runner.
Rows: ``strategy=data`` on every rank, and ``strategy=factored`` with each fixed allocation
(1 .. WORLD-1 samplers) and with ``samplers=auto`` (the allocation and measured K are
reported), once with the neighbour sampler and once with ``sampler=random_walk`` (PinSAGE:
4 walks of length 3, top 5). Epoch times are medians over the epochs after the first; queue
bytes per epoch are what the samplers sent. Footprint similarity (FGNN Table 2, computed by
:mod:`gnnscale.evaluation.footprint`): epoch 0's top-10% most visited vertices against epoch 1's,
weighted by visit counts, for 3-hop neighbour, random-walk and weighted neighbour sampling
(random edge weights when the graph has none). On a CPU-only host the design's point,
taking sampling off the GPUs that train, cannot show: every rank shares the same cores.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from benchmarks import compose_run, ratio

WORLD = 3
FANOUTS = [15, 10, 5]


SAMPLERS = {"neighbor": [f"sampler.fanouts={FANOUTS}"],
            "random_walk": ["sampler=random_walk", "sampler.num_layers=3"]}


def _run(tmp: Path, name: str, scale: float, epochs: int, extra: list[str]) -> list[dict]:
    from gnnscale.runner.run import run

    cfg = compose_run([
        "dataset=products_sim", f"dataset.scale={scale}", "model=sage", "model.hidden=256",
        "model.num_layers=3", "strategy.batch_size=1024",
        f"epochs={epochs}", "eval_every=0", "checkpoint=false", f"dist.world_size={WORLD}",
        "logger=none", *extra], tmp / name, tmp / "data")
    return run(cfg)["history"]


def _median(history: list[dict], key: str) -> float:
    return statistics.median(h[key] for h in history[1:])


def footprint_similarity(graph, sampler, batch_size: int, seed: int = 0) -> float:
    """FGNN Table 2 on one rank's draws of epochs 0 and 1 (the run metric's implementation)."""
    from gnnscale.cache.base import visit_counts
    from gnnscale.evaluation.footprint import footprint_similarity as similarity
    from gnnscale.sampling.schedule import Schedule

    schedule = Schedule(graph.train_idx, batch_size=batch_size, seed=seed)
    counts = [visit_counts(graph, schedule=schedule, sampler=sampler, epochs=[e])
              for e in (0, 1)]
    return similarity(*counts)


def _footprints(scale: float, batch_size: int) -> dict:
    import dataclasses

    import torch

    from gnnscale.data.synthetic import generate
    from gnnscale.sampling.neighbor import NeighborSampler
    from gnnscale.sampling.random_walk import RandomWalkSampler

    graph = generate("products_sim", scale=scale, seed=0)
    if graph.edge_weight is None:
        gen = torch.Generator().manual_seed(0)
        graph = dataclasses.replace(graph, edge_weight=torch.rand(graph.num_edges,
                                                                  generator=gen) + 0.01)
    samplers = {"neighbor": NeighborSampler(FANOUTS), "random_walk": RandomWalkSampler(3),
                "weighted": NeighborSampler(FANOUTS, weighted=True)}
    return {name: footprint_similarity(graph, s, batch_size) for name, s in samplers.items()}


def _presc_vs_oracle(quick: bool) -> dict:
    """FGNN Figure 11 for random-walk sampling: PreSC#1 against the oracle (and degree, random)
    at 1-25% caches, on the cache suite's products-like graph and batch size (seeds per vertex
    as in ogbn-products) with PinSAGE walks (4 walks of 3 steps, top 5, 3 hops)."""
    from benchmarks.cache import hit_rates, make_graphs, settings
    from gnnscale.sampling.random_walk import RandomWalkSampler

    cfg = settings(quick)
    graph = make_graphs(cfg)["products"]
    preset, scale, batch = cfg["graphs"]["products"]
    rates = hit_rates(graph, RandomWalkSampler(3), cfg, batch)
    by_policy = {name: {r: v["hit_rate"] for r, v in rows.items()} for name, rows in rates.items()}
    return {"graph": f"{preset} x{scale}", "batch_size": batch, "hit_rate": by_policy,
            "presample_over_oracle": {r: ratio(by_policy["presample"][r], by_policy["oracle"][r])
                                      for r in by_policy["oracle"]}}


def _rows(tmp: Path, sampler: str, scale: float, epochs: int) -> dict:
    rows: dict[str, dict] = {}
    hist = _run(tmp, f"data_{sampler}", scale, epochs, SAMPLERS[sampler])
    rows["data"] = {"epoch_s": _median(hist, "epoch_time")}
    for samplers in [*(str(s) for s in range(1, WORLD)), "auto"]:
        hist = _run(tmp, f"factored_{sampler}_{samplers}", scale, epochs,
                    [*SAMPLERS[sampler], "strategy=factored", f"strategy.samplers={samplers}"])
        last = hist[-1]
        rows[f"factored_{samplers}"] = {
            "epoch_s": _median(hist, "epoch_time"), "samplers": int(last["samplers"]),
            "trainers": int(last["trainers"]), "measured_k": last["measured_k"],
            "queue_bytes_per_epoch": last["queue_bytes"],
            "sampler_busy_s": _median(hist, "sampler_busy_time"),
            "sampler_idle_s": _median(hist, "sampler_idle_time"),
            "trainer_idle_s": _median(hist, "trainer_idle_time"),
        }
    fixed = [rows[f"factored_{s}"]["epoch_s"] for s in range(1, WORLD)]
    rows["auto_no_slower_than_worst_fixed"] = rows["factored_auto"]["epoch_s"] <= max(fixed)
    return rows


def run(quick: bool = False) -> dict:
    scale, epochs = (0.01, 3) if quick else (0.1, 3)
    config = {"dataset": f"products_sim x{scale}", "model": "sage", "layers": 3, "hidden": 256,
              "fanouts": FANOUTS, "random_walk": "4 walks x 3 steps, top 5",
              "batch_size": 1024, "ranks": WORLD, "epochs": epochs}
    with tempfile.TemporaryDirectory() as d:
        rows = {name: _rows(Path(d), name, scale, epochs) for name in SAMPLERS}
    allocation = {name: {k: r["factored_auto"][k] for k in ("samplers", "trainers", "measured_k")}
                  for name, r in rows.items()}
    results = {"rows": rows, "allocation": allocation,
               "footprint_similarity": _footprints(scale, 1024),
               "presc_vs_oracle_random_walk": _presc_vs_oracle(quick)}
    return {"config": config, "results": results,
            "ratios": {"data_over_factored": {
                name: ratio(r["data"]["epoch_s"], r["factored_auto"]["epoch_s"])
                for name, r in rows.items()}}}


# -- the shared queue against fixed routes with one trainer slowed -----------------------------
#: ``--quick`` / default workload: products-like graph, SAGE, 2 trainers and 1 sampler
QUEUE_WORKLOAD = {
    True: dict(scale=0.02, hidden=64, fanouts=[10, 5], batch=256, epochs=2, rounds=2),
    False: dict(scale=0.1, hidden=128, fanouts=[10, 10, 5], batch=1024, epochs=3, rounds=3),
}
QUEUE_RANKS = 3  # ranks 0 and 1 train, rank 2 samples; rank 1 is slowed


def _pin(core: int) -> None:
    """Every thread of this process on ``core`` (threads made later inherit the main one's)."""
    import os

    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), {core})
        except OSError:  # a thread that just ended
            continue


def pinned_rank(topo, cores: list[int], cfg_dict: dict, run_dir: str):
    """The runner's rank function on core ``cores[rank]`` (a rank function for the launcher)."""
    from gnnscale.runner.worker import rank_main

    _pin(cores[topo.rank])
    return rank_main(topo, cfg_dict, run_dir)


def spin_on(core: int):
    """A process that keeps ``core`` busy (a busy loop pinned there) until killed."""
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{core}}})"
                             "\nwhile True:\n    pass"])


def _queue_cfg(tmp: Path, name: str, w: dict, queue: str, staleness: int, jobs: int = 1):
    return compose_run([
        "dataset=products_sim", f"dataset.scale={w['scale']}", "model=sage",
        f"model.hidden={w['hidden']}", f"model.num_layers={len(w['fanouts'])}",
        f"sampler.fanouts={w['fanouts']}", "strategy=factored", "strategy.samplers=1",
        f"strategy.batch_size={w['batch']}", f"strategy.queue={queue}",
        f"strategy.staleness={staleness}", f"strategy.jobs_per_trainer={jobs}",
        f"epochs={w['epochs']}", "eval_every=0",
        "checkpoint=false", f"dist.world_size={QUEUE_RANKS}", "dist.threads_per_rank=1",
        "logger=none"], tmp / name, tmp / "data")


def _queue_run(cfg, cores: list[int]) -> list[dict]:
    from omegaconf import OmegaConf

    from gnnscale import registry
    from gnnscale.runner.validate import validate

    registry.load_all()
    validate(cfg)
    cfg_dict = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    Path(cfg_dict["run_dir"]).mkdir(parents=True, exist_ok=True)
    launcher = registry.build(cfg.dist)
    return launcher.launch(pinned_rank, cores, cfg_dict, cfg_dict["run_dir"])[0]["history"]


# (queue, staleness, jobs per trainer): routes take one job per trainer and step
QUEUE_VARIANTS = [("routes", 0, 1), ("shared", 0, 1), ("shared", 0, 2), ("shared", 0, 3),
                  ("routes", 1, 1), ("shared", 1, 1)]


def _variant_key(queue: str, staleness: int, jobs: int) -> str:
    return f"{queue}_staleness{staleness}" + (f"_jobs{jobs}" if jobs > 1 else "")


def queue_comparison(quick: bool = False) -> dict:
    """Epoch time of ``strategy.queue=shared`` against ``routes`` while a busy loop shares the
    core of trainer 1 (rank 1), at staleness 0 and 1, with 1 to 3 jobs per trainer and step on
    the shared queue at staleness 0 (GNNLab's micro-batching), the variants alternating run by run.

    Ranks are pinned: trainer 0 and the sampler on one core, trainer 1 and the busy loop on
    another (a third core, when there is one, takes the sampler). Epoch time is the median over
    the epochs after the first of each run, then over the rounds. Each row also holds the
    last epoch's deterministic volumes (input nodes gathered, edges computed: smaller jobs
    sample more nodes per target)."""
    import os

    w = QUEUE_WORKLOAD[quick]
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return {"skipped": "needs 2 cores: one for trainer 0, one for trainer 1 and the busy loop"}
    layout = [cores[0], cores[1], cores[2] if len(cores) > 2 else cores[0]]
    times: dict[str, list[float]] = {}
    jobs: dict[str, list[list[float]]] = {}
    volumes: dict[str, dict[str, float]] = {}
    spinner = spin_on(cores[1])
    try:
        with tempfile.TemporaryDirectory() as d:
            for r in range(w["rounds"]):
                for queue, staleness, per in QUEUE_VARIANTS:
                    key = _variant_key(queue, staleness, per)
                    hist = _queue_run(_queue_cfg(Path(d), f"{key}_{r}", w, queue, staleness, per),
                                      layout)
                    times.setdefault(key, []).append(_median(hist, "epoch_time"))
                    last = hist[-1]
                    volumes[key] = {"nodes_loaded": last.get("nodes_loaded", 0.0),
                                    "edges_computed": last.get("edges_computed", 0.0),
                                    "queue_bytes": last.get("queue_bytes", 0.0)}
                    if queue == "shared":
                        jobs.setdefault(key, []).append(
                            [last.get(f"queue_jobs_rank_{i}", 0.0) for i in range(2)])
    finally:
        spinner.kill()
        spinner.wait()
    rows = {key: {"epoch_s": statistics.median(v), "epoch_s_runs": v, **volumes[key]}
            for key, v in times.items()}
    for key, v in jobs.items():
        rows[key]["jobs_trainer0_trainer1_last_epoch"] = v
    ratios = {}
    for queue, staleness, per in QUEUE_VARIANTS:
        if queue == "shared":
            key = _variant_key(queue, staleness, per)
            ratios[f"{key}_over_routes"] = ratio(rows[key]["epoch_s"],
                                                 rows[f"routes_staleness{staleness}"]["epoch_s"])
    best_routes = min(rows[f"routes_staleness{k}"]["epoch_s"] for k in (0, 1))
    ratios["shared_staleness1_over_best_routes"] = ratio(rows["shared_staleness1"]["epoch_s"],
                                                         best_routes)
    config = {"dataset": f"products_sim x{w['scale']}", "model": "sage",
              "layers": len(w["fanouts"]), "hidden": w["hidden"], "fanouts": w["fanouts"],
              "batch_size": w["batch"], "ranks": "trainers 0, 1 and sampler 2",
              "cores": {"trainer0": layout[0], "trainer1_and_busy_loop": layout[1],
                        "sampler": layout[2]},
              "variants": [{"queue": q, "staleness": k, "jobs_per_trainer": m}
                           for q, k, m in QUEUE_VARIANTS],
              "epochs": w["epochs"], "rounds": w["rounds"], "threads_per_rank": 1}
    return {"config": config, "rows": rows, "ratios": ratios}
