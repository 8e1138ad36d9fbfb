"""Suite ``roofline``: every strategy's epoch against the bound this machine's limits give.

The machine (measured here, one thread per rank as the runs use, one process at a time,
before and after the runs, the better of the two kept):
``gemm_flops``, the best dense ``torch.mm`` rate over the shapes the models use (a batch of
rows times each layer's weight); ``stream_Bps``, a streaming copy (bytes read + written per
second); ``gather_Bps``, a random row gather at the feature width (gathered bytes per second);
``index_per_s``, random 8-byte reads per second (a random row gather of width 1: what sampling
an edge needs at least). These fill a hardware profile (:class:`gnnscale.cost.HardwareProfile`):
device memory and host link at ``gather_Bps`` (aggregation and feature loading read a random
row per edge or per loaded vertex), the rank-to-rank link at ``stream_Bps`` (a copy through
shared memory), FLOP/s at ``gemm_flops``, sampling at ``index_per_s``.

The epoch (measured): each strategy runs through the real runner on ``RANKS`` gloo ranks with
one thread each, ``eval_every=0``; ``data``, ``split``, ``factored``, ``fullgraph`` with each
``deps`` (depcache, depcomm, hybrid) and ``offload``, for the node and the link task. Its
volumes are what the run reports (``edges_computed``, ``vertex_updates``,
``bytes_host_to_rank``, ``bytes_rank_to_rank`` and the shuffles, ``bytes_allreduce``), read
back from the run folder by :func:`gnnscale.cost.volumes_of_run` (``offload``, which reports
no ``vertex_updates``, as the full-graph epoch it is); its FLOPs are
the linear maps' (:meth:`Volumes.update_flops`) plus the aggregation's (one add per row
element per row pass, the passes :meth:`Volumes.aggregation_bytes` counts), its bytes the
aggregation's (SpMM traffic), the gathered and exchanged rows and the gradients, and under
``task=link`` the decoder's (every scored pair's two embedding rows, :func:`decoder_bytes`).

The bound: :func:`gnnscale.cost.project` of those volumes onto the measured profile, its
stages (sampling, host-to-rank, compute, rank-to-rank, all-reduce; and the link decoder's
bytes at the gather rate) added, as a rank that runs
them one after another on one core must (``bound_s``); the strict roofline (the slowest stage
alone, everything overlapped) is ``bound_overlapped_s``. ``ratio`` = measured median epoch
(the slowest rank's, over the epochs after the first) / ``bound_s``; target <= 1.5. Each row
keeps the run's per-phase medians (``sample_time``, ``load_time``, ``compute_time``,
``comm_time``; the rest of the epoch is ``other``) beside the bound's stages, and ``where``
names the phase with the largest excess over its stage. The host's load average is recorded
before and after: on a shared host the measured figures are noisy, read them as ratios.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks import compose_run
from gnnscale.cost import HardwareProfile, Volumes, project, volumes_of_run
from gnnscale.cost.volumes import layer_widths, output_width
from gnnscale.data.presets import PRESETS

RANKS = 2
STRATEGIES: tuple[tuple[str, str | None], ...] = (
    ("data", None), ("split", None), ("factored", None), ("fullgraph", "depcache"),
    ("fullgraph", "depcomm"), ("fullgraph", "hybrid"), ("offload", None))
TASKS = ("node", "link")
THRESHOLD = 1.5
# A run phase and the bound's stages it pays for.
PHASES = {"sample_time": ("sample",), "load_time": ("host_to_rank",),
          "compute_time": ("compute", "decoder"), "comm_time": ("rank_to_rank", "allreduce")}


def settings(quick: bool) -> dict:
    """The workload: products-like graph (``products_sim`` statistics), SAGE 2 layers, hidden
    64, fanouts 10,10; the link task on a smaller graph (its epoch covers every training edge)."""
    return {"preset": "products_sim", "scale": {"node": 0.005 if quick else 0.02,
                                                "link": 0.001 if quick else 0.004},
            "batch": {"node": 1024, "link": 4096}, "hidden": 64, "layers": 2,
            "fanouts": [10, 10], "epochs": 3 if quick else 4, "ranks": RANKS, "threads": 1,
            "machine_mb": 32 if quick else 128}


# -- the machine ----------------------------------------------------------------------------------
def _best(fn, repeats: int) -> float:
    """Fastest of ``repeats`` timed calls after one warm-up (the ceiling, not the typical)."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def gemm_shapes(batch_rows: int, widths: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """``(m, k, n)`` of the models' dense maps: ``batch_rows`` rows through each layer's
    weight (forward ``x @ W``) and the weight gradient's ``x^T @ dy``."""
    shapes = []
    for k, n in widths:
        shapes += [(batch_rows, k, n), (k, batch_rows, n)]
    return shapes


def measure_machine(shapes: list[tuple[int, int, int]], width: int, megabytes: int = 32,
                    threads: int = 1, repeats: int = 5) -> dict[str, Any]:
    """Dense GEMM FLOP/s (best over ``shapes``), streaming copy bytes/s, random row gather
    bytes/s at ``width`` floats, random 8-byte reads/s; with ``threads`` intra-op threads."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(0)
        gemm = {}
        for m, k, n in shapes:
            a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
            gemm[f"{m}x{k}x{n}"] = 2.0 * m * k * n / _best(lambda a=a, b=b: torch.mm(a, b), repeats)
        n = megabytes * (1 << 20) // 4
        src, dst = torch.randn(n, generator=g), torch.empty(n)
        stream = 2.0 * 4 * n / _best(lambda: dst.copy_(src), repeats)
        rows = max(n // width, 1)
        table = src[: rows * width].view(rows, width)
        idx = torch.randint(rows, (rows,), generator=g)
        out = torch.empty(rows, width)
        gather = 4.0 * rows * width / _best(
            lambda: torch.index_select(table, 0, idx, out=out), repeats)
        longs = torch.randint(1 << 30, (n // 2,), generator=g)
        pick = torch.randint(n // 2, (n // 2,), generator=g)
        picked = torch.empty_like(longs)
        index = (n // 2) / _best(lambda: torch.index_select(longs, 0, pick, out=picked), repeats)
    finally:
        torch.set_num_threads(before)
    return {"gemm_flops": max(gemm.values()), "gemm_flops_by_shape": gemm,
            "stream_Bps": stream, "gather_Bps": gather, "gather_width": width,
            "index_per_s": index, "threads": threads, "megabytes": megabytes}


def profile_of(machine: dict[str, Any], ranks: int) -> HardwareProfile:
    """The measured machine as a cost-model profile of ``ranks`` CPU ranks on one host."""
    return HardwareProfile(
        name="this_host (measured)", device="cpu", nodes=1, devices_per_node=ranks,
        compute_flops=machine["gemm_flops"], memory_Bps=machine["gather_Bps"],
        memory_bytes=float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")),
        host_to_device_Bps=machine["gather_Bps"], peer_Bps=machine["stream_Bps"],
        sample_edges_per_s=machine["index_per_s"], source="measured by benchmarks/roofline.py")


# -- an epoch's counts and its bound -------------------------------------------------------------
def aggregation_flops(v: Volumes) -> float:
    """FLOPs of aggregation: one add per row element per row pass (forward, and the
    backward's two, as :meth:`Volumes.aggregation_bytes` counts the passes)."""
    return sum(3.0 * e * d_in for e, _, d_in, _ in v.layers)


def counts(v: Volumes, dec_bytes: float = 0.0) -> dict[str, float]:
    """An epoch's FLOPs and bytes (summed over ranks) from its volumes (and the link
    decoder's bytes, :func:`decoder_bytes`)."""
    return {"bytes_decoder": dec_bytes, "flops_linear": v.update_flops(),
            "flops_aggregation": aggregation_flops(v),
            "flops": v.update_flops() + aggregation_flops(v),
            "bytes_aggregation": v.aggregation_bytes(),
            "bytes_host_to_rank": v.bytes_host_to_rank,
            "bytes_rank_to_rank": v.bytes_rank_to_rank, "bytes_allreduce": v.bytes_allreduce,
            "bytes": v.aggregation_bytes() + v.bytes_host_to_rank + v.bytes_rank_to_rank
            + v.bytes_allreduce + dec_bytes, "sampled_edges": v.sampled_edges}


def bound(v: Volumes, hw: HardwareProfile, dec_bytes: float = 0.0) -> dict[str, float]:
    """The epoch's bound on ``hw``: the projection's stages plus the link decoder's (its bytes
    at device memory speed, shared by the trainers), their sum (``bound_s``) and the slowest
    stage alone (``bound_overlapped_s``)."""
    p = project(v, hw)
    trainers = max(v.ranks - v.sampler_ranks, 1)
    stages = {"sample": p.sample, "host_to_rank": p.host_to_rank, "compute": p.compute,
              "decoder": dec_bytes / hw.memory_Bps / trainers,
              "rank_to_rank": p.rank_to_rank, "allreduce": p.allreduce}
    return {"bound_s": p.total + stages["decoder"], "bound_overlapped_s": max(stages.values()),
            "stages": stages}


def decoder_bytes(pairs: float, dim: int) -> float:
    """Bytes of scoring ``pairs`` with the dot decoder: both endpoints' ``dim``-wide rows
    gathered (forward) and their gradients read and scattered back (backward), 3 row passes
    of 4-byte floats, as :meth:`Volumes.aggregation_bytes` counts an edge's."""
    return 3 * 4 * 2 * pairs * dim


def where(phases: dict[str, float], stages: dict[str, float], epoch_s: float) -> str:
    """The phase whose measured seconds exceed its bound stages the most, as a sentence."""
    excess = {name: phases.get(name, 0.0) - sum(stages[s] for s in PHASES[name])
              for name in PHASES}
    excess["other"] = max(epoch_s - sum(phases.get(n, 0.0) for n in PHASES), 0.0)
    name = max(excess, key=excess.get)
    return (f"{name} {excess[name]:.3g}s over its bound ({100 * excess[name] / epoch_s:.0f}% of "
            "the epoch)")


def row(history: list[dict], v: Volumes, hw: HardwareProfile, dec_bytes: float = 0.0
        ) -> dict[str, Any]:
    """One strategy's row: the measured epoch and phases (medians after the first epoch),
    the counts, the bound and the ratio."""
    h = history[1:] or history
    epoch_s = statistics.median(float(r["epoch_time"]) for r in h)
    phases = {k: statistics.median(float(r.get(k, 0.0)) for r in h)
              for k in (*PHASES, "split_time")}
    b = bound(v, hw, dec_bytes)
    out = {"epoch_s": epoch_s, "phases": phases, **counts(v, dec_bytes), **b,
           "ratio": epoch_s / b["bound_s"], "ratio_overlapped": epoch_s / b["bound_overlapped_s"]}
    out["within_target"] = out["ratio"] <= THRESHOLD
    out["where"] = where(phases, b["stages"], epoch_s)
    return out


# -- the runs -------------------------------------------------------------------------------------
def overrides(cfg: dict, strategy: str, deps: str | None, task: str) -> list[str]:
    """The Hydra overrides of one row's run."""
    ov = [f"dataset={cfg['preset']}", f"dataset.scale={cfg['scale'][task]}", "model=sage",
          f"model.hidden={cfg['hidden']}", f"model.num_layers={cfg['layers']}",
          f"sampler.fanouts={cfg['fanouts']}", f"strategy={strategy}", f"task={task}",
          f"epochs={cfg['epochs']}", "eval_every=0", "checkpoint=false", "logger=none",
          f"dist.world_size={cfg['ranks']}", f"dist.threads_per_rank={cfg['threads']}"]
    if strategy in ("data", "split", "factored"):
        ov.append(f"strategy.batch_size={cfg['batch'][task]}")
    if deps:
        ov.append(f"deps={deps}")
    return ov


def run_one(tmp: Path, cfg: dict, strategy: str, deps: str | None, task: str) -> Any:
    """Train one row through the runner; the finished run (:class:`gnnscale.compare.Run`)."""
    from gnnscale.compare.runs import load_run
    from gnnscale.runner.run import run

    name = f"{task}-{strategy}" + (f"-{deps}" if deps else "")
    run(compose_run(overrides(cfg, strategy, deps, task), tmp / name, tmp / "data"))
    return load_run(tmp / name)


def best_of(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two measurements of the machine merged rate by rate (the higher: the ceiling)."""
    out = dict(a)
    for key in ("gemm_flops", "stream_Bps", "gather_Bps", "index_per_s"):
        out[key] = max(a[key], b[key])
    out["gemm_flops_by_shape"] = {k: max(v, b["gemm_flops_by_shape"][k])
                                  for k, v in a["gemm_flops_by_shape"].items()}
    return out


def epoch_volumes(run_: Any) -> tuple[Volumes, float]:
    """The run's volumes (:func:`volumes_of_run`: ``offload`` as the full-graph epoch it is,
    the link task's output width ``task.dim``) and its link decoder's bytes (0 for the node
    task): an epoch scores every training positive and ``task.num_negatives`` negatives each,
    the positives half the message graph's edges (an undirected split: both directions of
    each)."""
    v = volumes_of_run(run_)
    task = run_.config.get("task") or {}
    dec = 0.0
    if str(task.get("_target_", "")).endswith("LinkTask"):
        pairs = run_.graph["num_edges"] / 2 * (1 + int(task.get("num_negatives", 1)))
        dec = decoder_bytes(pairs, output_width(run_.config, run_.graph))
    return v, dec


def run(quick: bool = False) -> dict:
    cfg = settings(quick)
    params = PRESETS[cfg["preset"]]
    widths = layer_widths(params.num_features, cfg["hidden"], params.num_classes, cfg["layers"])
    shapes = gemm_shapes(cfg["batch"]["node"], widths)

    def machine() -> dict[str, Any]:
        return measure_machine(shapes, params.num_features, cfg["machine_mb"], cfg["threads"])

    load_before = os.getloadavg()
    first = machine()
    runs = {}
    with tempfile.TemporaryDirectory() as d:
        for task in TASKS:
            for strategy, deps in STRATEGIES:
                key = f"{task}/{strategy}" + (f"/{deps}" if deps else "")
                runs[key] = run_one(Path(d), cfg, strategy, deps, task)
    measured = best_of(first, machine())  # before and after the runs: the better of each
    load_after = os.getloadavg()
    hw = profile_of(measured, cfg["ranks"])
    rows: dict[str, dict] = {}
    for key, r in runs.items():
        v, dec = epoch_volumes(r)
        rows[key] = row(r.history, v, hw, dec)
        rows[key]["graph"] = r.graph
    above = sorted(k for k, v in rows.items() if not v["within_target"])
    return {"config": cfg,
            "results": {"machine": measured, "machine_first": first, "rows": rows,
                        "load_average_before": load_before, "load_average_after": load_after},
            "ratios": {"epoch_over_bound": {k: v["ratio"] for k, v in rows.items()},
                       "epoch_over_overlapped_bound": {k: v["ratio_overlapped"]
                                                       for k, v in rows.items()},
                       "worst": max(v["ratio"] for v in rows.values()),
                       "rows_above_target": above}}
