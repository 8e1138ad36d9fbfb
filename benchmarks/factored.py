"""Suite ``factored``: GNNLab's factored design against data parallelism at equal ranks.

Workload: products-like synthetic graph (``quick``: scale 0.01, else 0.1), GraphSAGE 3 layers,
hidden 256, fanouts 15,10,5, global batch 1024, ``WORLD`` ranks, through the real runner.
Rows: ``strategy=data`` on every rank, and ``strategy=factored`` with each fixed allocation
(1 .. WORLD-1 samplers) and with ``samplers=auto`` (the allocation and measured K are
reported). Epoch times are medians over the epochs after the first; queue bytes per epoch
are what the samplers sent. Only the neighbour sampler is measured (``random_walk`` is not
implemented yet: its ratio is null with the reason). On a CPU-only host the design's point,
taking sampling off the GPUs that train, cannot show: every rank shares the same cores.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from benchmarks import ratio

WORLD = 3
FANOUTS = [15, 10, 5]


def _run(tmp: Path, name: str, scale: float, epochs: int, extra: list[str]) -> list[dict]:
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    from gnnscale import registry
    from gnnscale.runner.run import run

    registry.load_all()
    configs = Path(__file__).resolve().parents[1] / "configs"
    with initialize_config_dir(str(configs), version_base=None):
        cfg = compose("config", overrides=[
            "dataset=products_sim", f"dataset.scale={scale}", "model=sage", "model.hidden=256",
            "model.num_layers=3", f"sampler.fanouts={FANOUTS}", "strategy.batch_size=1024",
            f"epochs={epochs}", "eval_every=0", "checkpoint=false", f"dist.world_size={WORLD}",
            "logger=none", *extra])
    with open_dict(cfg):
        cfg.run_dir, cfg.data_root, cfg.progress = str(tmp / name), str(tmp / "data"), False
    return run(cfg)["history"]


def _median(history: list[dict], key: str) -> float:
    return statistics.median(h[key] for h in history[1:])


def run(quick: bool = False) -> dict:
    scale, epochs = (0.01, 3) if quick else (0.1, 3)
    config = {"dataset": f"products_sim x{scale}", "model": "sage", "layers": 3, "hidden": 256,
              "fanouts": FANOUTS, "batch_size": 1024, "ranks": WORLD, "epochs": epochs,
              "sampler": "neighbor"}
    rows: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as d:
        hist = _run(Path(d), "data", scale, epochs, [])
        rows["data"] = {"epoch_s": _median(hist, "epoch_time")}
        for samplers in [*(str(s) for s in range(1, WORLD)), "auto"]:
            hist = _run(Path(d), f"factored_{samplers}", scale, epochs,
                        ["strategy=factored", f"strategy.samplers={samplers}"])
            last = hist[-1]
            rows[f"factored_{samplers}"] = {
                "epoch_s": _median(hist, "epoch_time"), "samplers": int(last["samplers"]),
                "trainers": int(last["trainers"]), "measured_k": last["measured_k"],
                "queue_bytes_per_epoch": last["queue_bytes"],
                "sampler_busy_s": _median(hist, "sampler_busy_time"),
                "sampler_idle_s": _median(hist, "sampler_idle_time"),
                "trainer_idle_s": _median(hist, "trainer_idle_time"),
            }
    auto = rows["factored_auto"]
    fixed = [rows[f"factored_{s}"]["epoch_s"] for s in range(1, WORLD)]
    results = {
        "rows": rows,
        "allocation": {"samplers": auto["samplers"], "trainers": auto["trainers"],
                       "measured_k": auto["measured_k"]},
        "auto_no_slower_than_worst_fixed": auto["epoch_s"] <= max(fixed),
        "random_walk_reason": "sampler=random_walk is not implemented yet",
    }
    return {"config": config, "results": results,
            "ratios": {"data_over_factored": {
                "neighbor": ratio(rows["data"]["epoch_s"], auto["epoch_s"]),
                "random_walk": None}}}
