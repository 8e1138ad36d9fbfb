"""Suite ``auto``: does ``strategy=auto`` pick a strategy within 10% of the fastest? (issue 14)

Per preset (papers_like, products_like, reddit_like, web_like at the scales of
:data:`SETTINGS`): one ``strategy=auto`` run through the real runner (every candidate profiled,
in one launch, for ``profile_epochs`` epochs cut to their first ``strategy.profile_steps``
steps, with no budget; one chosen, then trained for ``auto_epochs``), then every candidate
that ran in the profile trained separately with the deps and cache auto gave it (read from
``<run_dir>/auto.json``, checked against the profile run's saved config) for the same
``profile_epochs`` whole epochs: the score a whole-epoch profile gives, against which the pick
of auto's short profile is checked. The separate runs go in ``rounds``:
round r trains every candidate once in an order rotated by r, so slow drift of a shared host
falls on every candidate alike; a candidate's figures are medians over rounds. Per run: the
median epoch time of the epochs after the first (auto's warm-up rule), the loss drop per
epoch from auto's initial loss, and the score auto ranks by
(:func:`~gnnscale.strategies.auto.choice.seconds_per_loss`, seconds per unit of loss decrease).
All runs share one model, optimizer and seed: SAGE 2x64, fanouts [10,10], Adam, seed 0,
2 ranks.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import compose_run, ratio

#: Part ``profile`` (``python -m benchmarks.auto profile [--quick] --out PATH``): how long
#: ``strategy=auto`` profiles against its whole run: the README's default command and the
#: longer run docs/choosing-a-strategy.md shows, under the default budget and with every
#: candidate profiled (``strategy.profile_share=null``); each run from start to results, the
#: profiling from start to the decision (``auto.json`` written), the host load beside them.
PROFILE_RUNS = {
    False: {"default": ["strategy=auto", "dist.world_size=2"],
            "papers_like": ["strategy=auto", "dist.world_size=2", "dataset=papers_like",
                            "dataset.scale=0.2", "model.num_layers=2", "sampler.fanouts=[10,10]",
                            "strategy.batch_size=256", "strategy.profile_epochs=3",
                            "epochs=20"]},
    True: {"tiny": ["strategy=auto", "dist.world_size=2", "dataset.preset=tiny",
                    "model.hidden=32", "model.num_layers=2", "sampler.fanouts=[5,5]",
                    "strategy.batch_size=128"]},
}
PROFILE_VARIANTS = {"budget": [], "every_candidate": ["strategy.profile_share=null"]}

WORLD = 2
TARGET = 1.10  # issue 14: the pick's score within 10% of the best separate score
COMMON = ["model=sage", "model.hidden=64", "model.num_layers=2", "sampler.fanouts=[10,10]",
          f"dist.world_size={WORLD}", "seed=0", "checkpoint=false", "logger=none"]
# preset -> (dataset.scale, global batch): several mini-batch steps per epoch (train nodes /
# batch ~9-12), full-graph epochs of a few seconds at most on 2 cores (docs/presets.md sizes).
SETTINGS = {
    False: {"papers_like": (0.5, 64),     # 50k nodes, ~545 train: 9 steps
            "products_like": (0.3, 128),  # 14.7k nodes, ~1180 train: 10 steps
            "reddit_like": (0.1, 128),    # 2k nodes (mean degree 490), ~1320 train: 11 steps
            "web_like": (0.3, 256)},      # 30k nodes, ~3000 train: 12 steps
    # --quick: two presets and one round only: every run costs ~5-7 s of start-up and
    # evaluation on 2 cores whatever its size (four presets' 6 auto runs alone take ~2.5 min)
    True: {"papers_like": (0.1, 32),      # 10k nodes, ~109 train: 4 steps
           "web_like": (0.05, 128)},      # 5k nodes, ~500 train: 4 steps
}
# (profile_epochs = epochs of every separate run, epochs the pick trains in the auto run, rounds)
PLAN = {False: (4, 4, 3), True: (3, 2, 1)}


def rotation(names: list[str], rounds: int) -> list[list[str]]:
    """The order of each round: round r starts at the r-th name (cyclically)."""
    if not names:
        return [[] for _ in range(rounds)]
    return [names[r % len(names):] + names[:r % len(names)] for r in range(rounds)]


def run_figures(history: list[dict], loss0: float) -> dict[str, Any]:
    """Epoch time, loss drop per epoch and score of one run, by auto's own rules."""
    from gnnscale.strategies.auto.choice import seconds_per_loss

    times = [h["epoch_time"] for h in history]
    epoch_time = statistics.median(times[1:] if len(times) > 1 else times)
    drop = (loss0 - history[-1]["train_loss"]) / len(history)
    return {"epoch_time": epoch_time, "loss_drop_per_epoch": drop,
            "seconds_per_loss": seconds_per_loss(epoch_time, drop)}


def over_rounds(runs: list[dict]) -> dict[str, Any]:
    """A candidate's figures: medians over its rounds, plus each round's and the spread."""
    out: dict[str, Any] = {}
    for key in ("epoch_time", "loss_drop_per_epoch", "seconds_per_loss", "final_test_acc"):
        values = [r[key] for r in runs if r.get(key) is not None]
        out[key] = statistics.median(values) if values else None
        out[f"{key}_rounds"] = values
    times = out["epoch_time_rounds"]
    out["epoch_time_spread"] = ((max(times) - min(times)) / out["epoch_time"]
                                if len(times) > 1 and out["epoch_time"] else 0.0)
    return out


def pick_ratios(chosen: str, separate: dict[str, dict]) -> dict[str, Any]:
    """The pick's score and epoch time over the best separate ones, and the target check."""
    scores = {s: r["seconds_per_loss"] for s, r in separate.items()}
    times = {s: r["epoch_time"] for s, r in separate.items()}
    best_score, best_time = min(scores, key=scores.get), min(times, key=times.get)
    over = ratio(scores.get(chosen), scores[best_score])
    return {"fastest_by_score": best_score, "fastest_by_epoch_time": best_time,
            "pick_over_fastest": over,
            "pick_over_fastest_epoch_time": ratio(times.get(chosen), times[best_time]),
            "within_10_percent": over is not None and over <= TARGET}


def _compose(overrides: list[str], run_dir: Path, data_root: Path):
    return compose_run([*COMMON, *overrides], run_dir, data_root)


def _run_auto(tmp: Path, preset: str, scale: float, batch: int, plan: tuple) -> dict:
    from gnnscale.runner.run import run

    profile_epochs, auto_epochs, _ = plan
    run_dir = tmp / preset / "auto"
    cfg = _compose([f"dataset={preset}", f"dataset.scale={scale}", "strategy=auto",
                    f"strategy.batch_size={batch}", f"strategy.profile_epochs={profile_epochs}",
                    "strategy.profile_share=null", f"epochs={auto_epochs}", "eval_every=0"],
                   run_dir, tmp / "data")
    started = time.time()
    results = run(cfg)
    timing = profile_share(run_dir, started, time.time())
    decision = json.loads((run_dir / "auto.json").read_text())
    keep = ("name", "status", "deps", "cache", "epoch_time", "epoch_times",
            "loss_drop_per_epoch", "seconds_per_loss", "reason")
    return {"chosen": decision["chosen"], "why": decision["why"],
            "initial_loss": decision["initial_loss"], "run_dir": str(run_dir),
            "candidates": [{k: r[k] for k in keep if k in r} for r in decision["candidates"]],
            "pick_epoch_time": results["summary"]["median_epoch_time"],
            "profile_s": timing["profile_s"], "run_s": timing["run_s"],
            "pick_final_test_acc": results["summary"].get("final_test_acc")}


def _separate_config(tmp: Path, preset: str, scale: float, batch: int, row: dict,
                     auto_dir: Path, epochs: int, tag: str):
    """``strategy=<candidate>`` with the deps/cache auto gave it, checked against the config
    its profile run saved (so the separate run is the profiled configuration)."""
    from omegaconf import OmegaConf

    from gnnscale import registry

    name = row["name"]
    extra = [f"strategy.batch_size={batch}"] if "batch_size" in registry.option(
        "strategy", name) else []
    cfg = _compose([f"dataset={preset}", f"dataset.scale={scale}", f"strategy={name}",
                    f"deps={row['deps']}", f"cache={row['cache']}", *extra, f"epochs={epochs}",
                    "eval_every=0"], tmp / preset / tag, tmp / "data")
    saved = json.loads((auto_dir / "auto" / name / "results.json").read_text())["config"]
    for group in ("deps", "cache", "strategy", "model", "sampler", "dataset"):
        mine = OmegaConf.to_container(cfg[group], resolve=True, enum_to_str=True)
        if mine != saved[group]:
            raise RuntimeError(f"suite auto: {preset}/{name}: the separate run's {group} "
                               f"{mine} differs from what auto profiled {saved[group]}")
    return cfg


def _separate(tmp: Path, preset: str, scale: float, batch: int, auto: dict,
              plan: tuple) -> tuple[dict, list[list[str]]]:
    from gnnscale.runner.run import run

    epochs, _, rounds = plan
    rows = {r["name"]: r for r in auto["candidates"] if r["status"] == "ran"}
    order = rotation(list(rows), rounds)
    runs: dict[str, list[dict]] = {name: [] for name in rows}
    for r, names in enumerate(order):
        for name in names:
            cfg = _separate_config(tmp, preset, scale, batch, rows[name], Path(auto["run_dir"]),
                                   epochs, f"{name}_r{r}")
            results = run(cfg)
            fig = run_figures(results["history"], auto["initial_loss"])
            fig["final_test_acc"] = results["summary"].get("final_test_acc")
            runs[name].append(fig)
    return {name: over_rounds(rs) for name, rs in runs.items()}, order


def run(quick: bool = False, presets: tuple[str, ...] | None = None) -> dict:
    """The suite; ``presets`` limits it to some presets (tests)."""
    settings = SETTINGS[quick]
    presets = tuple(settings) if presets is None else presets
    unknown = [p for p in presets if p not in settings]
    if unknown:
        raise SystemExit(f"suite auto: no {'quick' if quick else 'quoted'} setting for presets "
                         f"{unknown}; choose among {list(settings)}")
    plan = PLAN[quick]
    profile_epochs, auto_epochs, rounds = plan
    config = {
        "common": " ".join(COMMON), "scales": {p: settings[p][0] for p in presets},
        "batch_size": {p: settings[p][1] for p in presets},
        "auto": f"strategy=auto strategy.batch_size=<batch> strategy.profile_epochs="
                f"{profile_epochs} strategy.profile_share=null epochs={auto_epochs} "
                "eval_every=0 (every candidate profiled: the rule is measured, not the budget)",
        "separate": f"strategy=<s> deps/cache as in auto.json [strategy.batch_size=<batch>] "
                    f"epochs={profile_epochs} eval_every=0, {rounds} rounds in rotated order; "
                    "per run median epoch_time of epochs 1.., loss drop per epoch from auto's "
                    "initial loss; medians over rounds",
        "target": f"pick's separate score <= {TARGET} x the best separate score"}
    results: dict[str, Any] = {}
    ratios: dict[str, dict] = {k: {} for k in ("pick_over_fastest",
                                               "pick_over_fastest_epoch_time",
                                               "within_10_percent")}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for preset in presets:
            scale, batch = settings[preset]
            auto = _run_auto(tmp, preset, scale, batch, plan)
            separate, order = _separate(tmp, preset, scale, batch, auto, plan)
            auto.pop("run_dir")
            picked = pick_ratios(auto["chosen"], separate)
            results[preset] = {"auto": auto, "separate": separate, "round_order": order,
                               "fastest_by_score": picked["fastest_by_score"],
                               "fastest_by_epoch_time": picked["fastest_by_epoch_time"]}
            for key in ratios:
                ratios[key][preset] = picked[key]
    return {"config": config, "results": results, "ratios": ratios}


def profile_share(run_dir: Path, started: float, finished: float) -> dict[str, Any]:
    """One auto run's profiling against its whole: seconds from ``started`` (wall clock) to
    the decision (``auto.json`` written, once, by rank 0 when it chooses) and to ``finished``,
    the share, the decision's candidates (name, status), pick and profiling phases."""
    decision_file = run_dir / "auto.json"
    decision = json.loads(decision_file.read_text())
    profiling = decision_file.stat().st_mtime - started
    whole = finished - started
    return {"profile_s": profiling, "run_s": whole, "profile_share": profiling / whole,
            "chosen": decision["chosen"],
            "candidates": {r["name"]: r["status"] for r in decision["candidates"]},
            "profile_seconds_in_auto_json": decision.get("profile_seconds"),
            "profile_phases": decision.get("profile_phases")}


def run_profile(quick: bool = False, variants: tuple[str, ...] | None = None,
                runs: tuple[str, ...] | None = None) -> dict:
    """Part ``profile``: every run of :data:`PROFILE_RUNS` (``runs``: some of them) under each
    of :data:`PROFILE_VARIANTS` (``variants``: some of them), its :func:`profile_share` and the
    host's load average before and after. The datasets are generated (once, in
    ``$GNNSCALE_DATA`` or the clone's ``data/``) before any run is timed."""
    from gnnscale.runner.run import run
    from gnnscale.runner.validate import open_dataset

    data_root = Path(os.environ.get("GNNSCALE_DATA", Path(__file__).resolve().parents[1]
                                    / "data"))
    variants = tuple(PROFILE_VARIANTS) if variants is None else variants
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        for name, overrides in PROFILE_RUNS[quick].items():
            if runs is not None and name not in runs:
                continue
            plain = [o for o in overrides if not o.startswith(("strategy", "epochs"))]
            open_dataset(compose_run(plain, Path(d) / "prep", data_root))
            for variant in variants:
                run_dir = Path(d) / f"{name}-{variant}"
                cfg = compose_run([*overrides, *PROFILE_VARIANTS[variant]], run_dir, data_root)
                load = os.getloadavg()
                started = time.time()
                run(cfg)
                fig = profile_share(run_dir, started, time.time())
                fig.update(load_before=load, load_after=os.getloadavg())
                results[f"{name}/{variant}"] = fig
                print(f"suite auto profile: {name}/{variant}: profiled {fig['profile_s']:.1f} s "
                      f"of {fig['run_s']:.1f} s ({fig['profile_share']:.0%}), chose "
                      f"{fig['chosen']}, load {load[0]:.1f}", flush=True)
    return {"config": {"runs": {k: " ".join(v) for k, v in PROFILE_RUNS[quick].items()},
                       "variants": {k: " ".join(v) or "(default)"
                                    for k, v in PROFILE_VARIANTS.items()}},
            "results": results,
            "ratios": {"profile_share": {k: r["profile_share"] for k, r in results.items()}}}


if __name__ == "__main__":
    from benchmarks.__main__ import run_part

    sys.exit(run_part("auto", "profile", run_profile, None,
                      "strategy=auto: profiling seconds against the whole run"))
