"""``strategy=auto``: profile the strategies that can run a config, pick one, train with it.

For each candidate (``strategy.candidates``) the launcher composes the config that
``strategy=<candidate>`` would give (every other group and key as the user gave them; the
candidate's own defaults from ``configs/strategy/<candidate>.yaml``; when the user left
``deps``/``cache`` unset, the candidate's best setting from :data:`BEST`), runs the
candidate's checks (a refusal is logged with its reason and the candidate skipped), and trains
it for ``strategy.profile_epochs`` epochs with the normal runner, real ranks, in
``<run_dir>/auto/<candidate>``. The choice rule is :func:`choose`; the decision table is
printed and written to ``<run_dir>/auto.json``; then the chosen config trains for ``epochs`` in
``<run_dir>`` and its ``results.json`` carries an ``auto`` entry saying so.
"""

from __future__ import annotations

import json
import math
import statistics
import traceback
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gnnscale import registry
from gnnscale.runner.validate import ConfigError

CANDIDATES = ("data", "split", "factored", "fullgraph", "offload")
CONFIGS = Path(__file__).resolve().parents[2] / "configs"
# Each candidate's deps and cache when the user set none (the papers' own settings):
# mini-batch strategies cache with PreSC (GNNLab, GSplit); data/factored replicate (DepCache),
# split communicates (GSplit's DepComm); fullgraph uses NeutronStar's hybrid (depcomm on a
# vertex-cut, the only deps it takes there); offload and fullgraph keep no feature cache.
BEST = {
    "data": ("depcache", "presample"),
    "factored": ("depcache", "presample"),
    "split": ("depcomm", "presample"),
    "fullgraph": ("hybrid", "none"),
    "offload": ("depcomm", "none"),
}


class Criterion(str, Enum):
    """What time the choice rule divides by the loss decrease per epoch."""

    measured = "measured"  # median measured epoch time of the profile
    modelled = "modelled"  # the cost model's projected epoch time on strategy.hardware


@registry.register("strategy", "auto")
@dataclass
class AutoConfig:
    _target_: str = "gnnscale.runner.auto.AutoStrategy"
    candidates: list[str] = field(default_factory=lambda: list(CANDIDATES))
    profile_epochs: int = 3  # epochs each candidate trains; the first is a warm-up
    criterion: Criterion = Criterion.measured
    hardware: str | None = None  # configs/hardware/<name> (criterion=modelled)
    batch_size: int | None = None  # global mini-batch of the sampling candidates (null: theirs)
    # when the two best scores are closer than rematch_within (or than either one's own
    # epoch-time spread), both train rematch_rounds more profiles, alternating (0: never)
    rematch_rounds: int = 2
    rematch_within: float = 0.10
    options: dict[str, Any] = field(default_factory=dict)  # {candidate: {key: value}}


class AutoStrategy:
    """The ``_target_`` of ``strategy=auto``: it is resolved in the launcher, never built."""

    def __init__(self, **_: Any) -> None:
        raise ConfigError("strategy=auto is resolved by the launcher (gnnscale.runner.run.run) "
                          "into a concrete strategy before any rank starts; it cannot be built")


def is_auto(cfg: DictConfig) -> bool:
    target = str(cfg.strategy.get("_target_", ""))
    return target == AutoConfig._target_


# -- composing a candidate's config -----------------------------------------------------------
def option_config(group: str, name: str, overrides: dict | None = None) -> DictConfig:
    """What ``group=name`` composes: its schema, its yaml's values, then ``overrides``."""
    node = registry.option(group, name)
    path = CONFIGS / group / f"{name}.yaml"
    body = OmegaConf.load(path) if path.is_file() else OmegaConf.create({})
    body.pop("defaults", None)
    return OmegaConf.merge(node, body, overrides or {})


def best_deps(name: str, cfg: DictConfig) -> str:
    """:data:`BEST`'s deps, but depcomm for fullgraph on a vertex-cut partitioner."""
    from hydra.utils import get_object

    deps = BEST[name][0]
    if name == "fullgraph" and cfg.get("partitioner") is not None:
        if getattr(get_object(cfg.partitioner._target_), "kind", "edge_cut") != "edge_cut":
            deps = "depcomm"
    return deps


def candidate_config(cfg: DictConfig, name: str, run_dir: Path, epochs: int) -> DictConfig:
    """``cfg`` (strategy=auto) as ``strategy=<name>`` would compose it, training ``epochs``
    in ``run_dir``."""
    auto = cfg.strategy
    base = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    overrides: dict[str, Any] = {}
    if auto.batch_size is not None and "batch_size" in registry.option("strategy", name):
        overrides["batch_size"] = auto.batch_size
    if auto.options.get(name):
        overrides.update(OmegaConf.to_container(auto.options[name]))
    try:
        node = option_config("strategy", name, overrides)
    except Exception as err:  # noqa: BLE001 - OmegaConf raises several kinds
        raise ConfigError(f"strategy.options.{name}: {err}") from err
    base["strategy"] = OmegaConf.to_container(node, enum_to_str=True)
    if OmegaConf.is_missing(cfg, "deps"):
        deps = option_config("deps", best_deps(name, cfg))
        base["deps"] = OmegaConf.to_container(deps, enum_to_str=True)
    if OmegaConf.is_missing(cfg, "cache"):
        cache = option_config("cache", BEST[name][1])
        base["cache"] = OmegaConf.to_container(cache, enum_to_str=True)
    base.update(run_dir=str(run_dir), epochs=epochs)
    return OmegaConf.create(base)


def check_auto(cfg: DictConfig) -> None:
    """The auto config's own keys."""
    auto = cfg.strategy
    unknown = [c for c in auto.candidates if c not in CANDIDATES]
    if unknown or not auto.candidates or len(set(auto.candidates)) != len(auto.candidates):
        raise ConfigError(f"strategy.candidates={list(auto.candidates)}: give distinct names "
                          f"among {list(CANDIDATES)}")
    extra = [k for k in auto.options if k not in auto.candidates]
    if extra:
        raise ConfigError(f"strategy.options names {extra}, which are not candidates "
                          f"({list(auto.candidates)})")
    if auto.profile_epochs < 1:
        raise ConfigError(f"strategy.profile_epochs must be >= 1, got {auto.profile_epochs}")
    if auto.rematch_rounds < 0 or auto.rematch_within < 0:
        raise ConfigError("strategy.rematch_rounds and strategy.rematch_within must be >= 0, "
                          f"got {auto.rematch_rounds} and {auto.rematch_within}")
    if auto.criterion == Criterion.modelled:
        from gnnscale.cost import ProfileError, load_profile

        if not auto.hardware:
            raise ConfigError("strategy.criterion=modelled projects onto a hardware profile: "
                              "set strategy.hardware=<name of configs/hardware/*.yaml>")
        try:
            load_profile(auto.hardware)
        except ProfileError as err:
            raise ConfigError(f"strategy.hardware: {err}") from err
    from gnnscale.distributed.topology import under_torchrun

    if under_torchrun():
        raise ConfigError("strategy=auto profiles its candidates from one launcher; under "
                          "torchrun run it on one host to pick, then launch the picked strategy")


def check_deps_fit(name: str, cfg: DictConfig) -> None:
    """The deps rules the strategies' constructors enforce (in the ranks), checked here so a
    mismatch is a refusal, not a failed run."""
    deps = registry.build(cfg.deps)
    if name in ("data", "factored") and not deps.replicates_all:
        raise ConfigError(f"strategy={name} replicates every dependency: use deps=depcache")
    if name == "split" and deps.replicates_all:
        raise ConfigError("strategy=split communicates dependencies: use deps=depcomm or "
                          "deps=hybrid")


# -- the choice rule --------------------------------------------------------------------------
def seconds_per_loss(epoch_time: float, loss_drop_per_epoch: float) -> float:
    """Time to accuracy per epoch: seconds per unit of training-loss decrease (inf when the
    loss did not decrease)."""
    return epoch_time / loss_drop_per_epoch if loss_drop_per_epoch > 0 else math.inf


def choose(rows: list[dict[str, Any]], criterion: str = "measured") -> tuple[str, str]:
    """The candidate with the fewest seconds per unit of training-loss decrease, and why.

    A row that ran has ``epoch_time`` (median measured, warm-up epoch skipped),
    ``projected_epoch_time`` (criterion=modelled) and ``loss_drop_per_epoch`` =
    (initial loss - loss of the last profiled epoch) / profiled epochs; the initial loss is
    the same for every candidate (same model, seed, initial parameters). Its score is
    time / loss_drop_per_epoch, with the measured or the projected time.
    """
    key = "epoch_time" if criterion == "measured" else "projected_epoch_time"
    scored = sorted((seconds_per_loss(r[key], r["loss_drop_per_epoch"]), r["name"], r)
                    for r in rows if r.get("status") == "ran")
    scored = [s for s in scored if math.isfinite(s[0])]
    if not scored:
        raise ConfigError("strategy=auto: no candidate ran and decreased the training loss; "
                          "see the decision table (auto.json) for each one's reason")
    best, name, row = scored[0]
    why = (f"{name}: {best:.3g} s per unit of training-loss decrease ({criterion} "
           f"{row[key]:.3g} s/epoch, loss -{row['loss_drop_per_epoch']:.3g}/epoch)")
    if len(scored) > 1:
        nxt, nxt_name, _ = scored[1]
        why += f", {nxt / best:.2f}x less than the runner-up {nxt_name} ({nxt:.3g})"
    return name, why


def spread(row: dict[str, Any]) -> float:
    """(max - min) / median of a profile's timed epochs (the warm-up epoch of each profile
    run left out): how far one candidate's own epoch time moves on this host."""
    times = row.get("timed_epochs") or row.get("epoch_times", [])[1:]
    if len(times) < 2:
        return 0.0
    return (max(times) - min(times)) / statistics.median(times)


def close_leaders(rows: list[dict[str, Any]], within: float) -> tuple[str, str, str] | None:
    """The two best-scored candidates (measured) and why they need a rematch, when the
    runner-up's score is within ``within`` of the best or within either one's own
    :func:`spread`; None when the lead is clear (or fewer than two ran)."""
    scored = sorted((r["seconds_per_loss"], r["name"], r) for r in rows
                    if r.get("status") == "ran" and math.isfinite(r.get("seconds_per_loss",
                                                                          math.inf)))
    if len(scored) < 2:
        return None
    (best, a, ra), (nxt, b, rb) = scored[:2]
    gap, noise = nxt / best - 1.0, max(spread(ra), spread(rb))
    if gap > max(within, noise):
        return None
    return a, b, (f"{b}'s score is {gap:.1%} above {a}'s, within max(rematch_within "
                  f"{within:.0%}, their epoch-time spread {noise:.0%})")


def pooled(first: dict[str, Any], more: list[dict[str, Any]]) -> dict[str, Any]:
    """One candidate's row over its first profile and its rematch profiles: the median of
    every timed epoch (each run's warm-up left out) and the median loss drop per epoch."""
    runs = [first, *more]
    timed = [t for r in runs for t in (r["epoch_times"][1:] or r["epoch_times"])]
    row = dict(first)
    row.update(timed_epochs=timed, epoch_time=statistics.median(timed),
               loss_drop_per_epoch=statistics.median(r["loss_drop_per_epoch"] for r in runs),
               profile_runs=[{"epoch_time": r["epoch_time"],
                              "loss_drop_per_epoch": r["loss_drop_per_epoch"],
                              "run_dir": r.get("run_dir")} for r in runs])
    row["seconds_per_loss"] = seconds_per_loss(row["epoch_time"], row["loss_drop_per_epoch"])
    return row


def rematch(cfg: DictConfig, rows: list[dict], run_dir: Path, graph, loss0: float
            ) -> dict[str, Any] | None:
    """Profile the two close leaders ``rematch_rounds`` more times in alternating order
    (a, b, then b, a, ...) and replace their rows by :func:`pooled` ones; what was done."""
    auto = cfg.strategy
    if auto.rematch_rounds == 0 or auto.criterion != Criterion.measured:
        return None
    leaders = close_leaders(rows, auto.rematch_within)
    if leaders is None:
        return None
    a, b, why = leaders
    print(f"[auto] rematch {a} and {b}: {why}; {auto.rematch_rounds} more profile(s) each, "
          "alternating", flush=True)
    more: dict[str, list[dict]] = {a: [], b: []}
    order = []
    for r in range(auto.rematch_rounds):
        for name in ((a, b) if r % 2 == 0 else (b, a)):
            order.append(name)
            row = profile(cfg, name, run_dir, graph, loss0, tag=f"rematch{r + 1}")
            if row.get("status") == "ran":
                more[name].append(row)
            else:  # its first profile stands; the pooled figure uses the runs that ran
                print(f"[auto] {name}: rematch {r + 1} {row['status']} ({row.get('reason')}); "
                      "pooling the profiles that ran", flush=True)
    for i, row in enumerate(rows):
        if row["name"] in more:
            rows[i] = pooled(row, more[row["name"]])
    return {"between": [a, b], "why": why, "rounds": auto.rematch_rounds, "order": order}


# -- profiling --------------------------------------------------------------------------------
def initial_loss(cfg: DictConfig, graph) -> float:
    """The training loss of the initial parameters every candidate starts from (the ranks
    seed the model the same way, see ``worker.build_context``)."""
    import torch
    import torch.nn.functional as F

    from gnnscale.distributed.launch import private_temp_dir
    from gnnscale.runner.evaluate import layerwise_logits

    torch.manual_seed(cfg.seed)
    with private_temp_dir():
        model = registry.build(cfg.model, in_channels=graph.num_features,
                               out_channels=graph.num_classes)
    model.bind_graph(graph)
    logits = layerwise_logits(model, graph, graph.train_idx, torch.device("cpu"),
                              cfg.eval_batch_size)
    return float(F.cross_entropy(logits, graph.y[graph.train_idx]))


def profile_row(name: str, ccfg: DictConfig, results: dict, loss0: float, auto) -> dict:
    """The figures :func:`choose` reads, from a finished profile run."""
    hist = results["history"]
    times = [h["epoch_time"] for h in hist]
    row = {"name": name, "status": "ran", "run_dir": str(ccfg.run_dir),
           "epoch_time": statistics.median(times[1:] if len(times) > 1 else times),
           "epoch_times": times, "losses": [h["train_loss"] for h in hist],
           "loss_drop_per_epoch": (loss0 - hist[-1]["train_loss"]) / len(hist),
           "val_acc": results["summary"].get("final_val_acc")}
    if auto.criterion == Criterion.modelled:
        from gnnscale.compare.runs import load_run
        from gnnscale.cost import load_profile, project_run

        row["projected_epoch_time"] = project_run(load_run(ccfg.run_dir),
                                                  load_profile(auto.hardware)).total
        row["hardware"] = auto.hardware
    row["seconds_per_loss"] = seconds_per_loss(
        row["projected_epoch_time" if auto.criterion == Criterion.modelled else "epoch_time"],
        row["loss_drop_per_epoch"])
    return row


def profile(cfg: DictConfig, name: str, run_dir: Path, graph, loss0: float,
            tag: str = "") -> dict:
    """Check and profile one candidate (in ``<run_dir>/auto/<name>[-<tag>]``); a row with
    status ran, refused or crashed."""
    from gnnscale.compare.runs import option_name
    from gnnscale.runner.run import run
    from gnnscale.runner.validate import check_config, check_data

    row: dict[str, Any] = {"name": name}
    try:
        where = run_dir / "auto" / (f"{name}-{tag}" if tag else name)
        ccfg = candidate_config(cfg, name, where, cfg.strategy.profile_epochs)
        row.update(deps=option_name(ccfg.deps._target_), cache=option_name(ccfg.cache._target_))
        with_flags = OmegaConf.merge(ccfg, {"eval_every": 0, "checkpoint": False,
                                            "resume": False, "logger": option_config(
                                                "logger", "none")})
        check_config(with_flags)
        check_deps_fit(name, with_flags)
        check_data(with_flags, graph)
    except ConfigError as err:
        print(f"[auto] {name}: refused: {err}", flush=True)
        return {**row, "status": "refused", "reason": str(err)}
    print(f"[auto] {name}: profiling {cfg.strategy.profile_epochs} epoch(s) in "
          f"{with_flags.run_dir}", flush=True)
    try:
        results = run(with_flags)
        return {**row, **profile_row(name, with_flags, results, loss0, cfg.strategy)}
    except Exception as err:  # noqa: BLE001 - a crashing candidate must not end the others
        trace = traceback.format_exc()
        Path(with_flags.run_dir, "crash.txt").write_text(trace)
        print(f"[auto] {name}: CRASHED ({type(err).__name__}: {err}); traceback in "
              f"{with_flags.run_dir}/crash.txt\n{trace}", flush=True)
        return {**row, "status": "crashed", "reason": f"{type(err).__name__}: {err}"}


def table(rows: list[dict], chosen: str) -> str:
    """The decision table, one line per candidate."""
    lines = [f"{'candidate':<10} {'status':<8} {'deps':<9} {'cache':<9} {'s/epoch':>8} "
             f"{'loss first->last':>17} {'drop/ep':>8} {'s/loss':>8}"]
    for r in rows:
        if r["status"] != "ran":
            lines.append(f"{r['name']:<10} {r['status']:<8} {r.get('deps', ''):<9} "
                         f"{r.get('cache', ''):<9} {r['reason'][:90]}")
            continue
        loss = f"{r['losses'][0]:.3f}->{r['losses'][-1]:.3f}"
        proj = (f"  projected {r['projected_epoch_time']:.3g} s/epoch"
                if "projected_epoch_time" in r else "")
        mark = "  <- chosen" if r["name"] == chosen else ""
        lines.append(f"{r['name']:<10} {'ran':<8} {r['deps']:<9} {r['cache']:<9} "
                     f"{r['epoch_time']:>8.3f} {loss:>17} {r['loss_drop_per_epoch']:>8.3f} "
                     f"{r['seconds_per_loss']:>8.3g}{proj}{mark}")
    return "\n".join(lines)


def run_auto(cfg: DictConfig) -> dict:
    """Profile every candidate, write ``auto.json``, train the chosen one; its results."""
    from gnnscale.runner.run import run

    check_auto(cfg)
    run_dir = Path(OmegaConf.to_container(cfg, resolve=True)["run_dir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    graph = registry.build(cfg.dataset).load()
    loss0 = initial_loss(cfg, graph)
    auto = cfg.strategy
    rows = [profile(cfg, name, run_dir, graph, loss0) for name in auto.candidates]
    decision = {"criterion": str(auto.criterion.value if isinstance(auto.criterion, Enum)
                                 else auto.criterion),
                "hardware": auto.hardware, "profile_epochs": auto.profile_epochs,
                "initial_loss": loss0, "candidates": rows, "chosen": None, "why": None,
                "rematch": None}
    try:
        decision["rematch"] = rematch(cfg, rows, run_dir, graph, loss0)
        del graph
        chosen, why = choose(rows, decision["criterion"])
        if decision["rematch"] is not None:
            why += (f"; after a rematch of {' and '.join(decision['rematch']['between'])} "
                    f"({decision['rematch']['rounds']} more profiles each, alternating)")
    finally:
        (run_dir / "auto.json").write_text(json.dumps(decision, indent=1))
    decision.update(chosen=chosen, why=why)
    (run_dir / "auto.json").write_text(json.dumps(decision, indent=1))
    print(f"\n[auto] decision (initial loss {loss0:.3f}; score = {decision['criterion']} "
          f"s/epoch / loss drop per epoch):\n{table(rows, chosen)}\n[auto] chose {why}\n",
          flush=True)
    results = run(candidate_config(cfg, chosen, run_dir, cfg.epochs))
    results["auto"] = {"strategy": chosen, "chosen_by": "auto", "why": why,
                       "criterion": decision["criterion"], "decision": "auto.json"}
    (run_dir / "results.json").write_text(json.dumps(results, indent=1))
    return results
