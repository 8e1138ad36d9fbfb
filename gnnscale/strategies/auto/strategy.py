"""``strategy=auto``: profile the strategies that can run a config, pick one, train with it.

The candidates are the registry's: every option of the ``strategy`` config group whose class
says it may be profiled (:meth:`~gnnscale.strategies.base.Strategy.why_not_candidate`), or
``strategy.candidates`` when given. For each, the launcher composes the config that
``strategy=<candidate>`` would give (every other group and key as the user gave them; deps and
cache the user left unset are the candidate's :meth:`preferred` ones) and runs it through the
normal validation (a refusal is logged with its reason and the candidate skipped). Every
candidate that passes is then profiled in ONE launch of the ranks
(:func:`~gnnscale.runner.profile.profile_configs`: one spawn, one process group, each built in
turn in ``<run_dir>/auto/<candidate>``), the sampling ones first, for
``strategy.profile_epochs`` epochs each cut to their first ``strategy.profile_steps`` steps (a
full-graph epoch is one step), without evaluation, under the budget (``strategy.profile_s``
seconds, else ``strategy.profile_share`` of the whole run). The choice rule is
:func:`~.choice.choose`: seconds per unit of decrease of the run's task's own training loss
(node classification, link prediction: any task whose declarations say ``auto_rankable``), per
profiled epoch, from the initial loss the task computes (:func:`initial_loss`, in the launch,
once per distinct model) for each candidate's own model (the same seed and initial parameters,
with the model options its strategy settles, e.g. GCN's normalisation); the decision table and
one line of the pick and why are printed and the table written to ``<run_dir>/auto.json``
(with ``profile_seconds``); then the chosen config trains for ``epochs`` in ``<run_dir>`` and
its ``results.json`` carries an ``auto`` entry saying so. On ``resume=true`` with a checkpoint
in ``<run_dir>``, the recorded choice trains on, unprofiled.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from omegaconf import DictConfig, OmegaConf

from gnnscale.errors import ConfigError
from gnnscale.strategies.auto.candidates import candidate_config, option_node
from gnnscale.strategies.auto.choice import (
    choose,
    close_leaders,
    over_budget,
    pooled,
    seconds_per_loss,
    table,
)
from gnnscale.strategies.auto.config import AutoConfig, Criterion, check_auto, chosen_candidates
from gnnscale.strategies.base import Strategy
from gnnscale.strategies.config import declared, epochs_left
from gnnscale.tasks.config import declared_task

if TYPE_CHECKING:
    from gnnscale.data.graph import GraphStore
    from gnnscale.models.base import GNN
    from gnnscale.tasks.base import Task

Train = Callable[[DictConfig], dict]
#: the runner's :func:`~gnnscale.runner.profile.profile_configs` (its ``launch`` bound):
#: ``(jobs, steps, budget) -> outcomes``
Profile = Callable[[list[dict], "int | None", dict], list[dict]]


class Auto(Strategy):
    """A meta strategy: resolved in the launcher into profile runs and one chosen run."""

    schema = AutoConfig

    def __init__(self, *_: Any, **__: Any) -> None:
        raise ConfigError("strategy=auto is resolved by the launcher into a concrete strategy "
                          "before any rank starts; it cannot be built in a rank")

    @classmethod
    def train_meta(cls, cfg: DictConfig, train: Train, profile: Profile | None = None) -> dict:
        """Profile the candidates, choose, train the chosen one (see :func:`run_auto`)."""
        return run_auto(cfg, train, profile)

    def setup(self) -> None:  # never built
        """Never called: a meta strategy is not built in a rank."""
        raise NotImplementedError

    def train_epoch(self, epoch: int, progress: Any = None) -> dict[str, float]:
        """Never called: a meta strategy is not built in a rank."""
        raise NotImplementedError


def rematch(cfg: DictConfig, rows: list[dict], run_dir: Path, loss0: dict[str, float],
            profile: Profile, budget: dict[str, Any]) -> dict[str, Any] | None:
    """Profile the two close leaders ``rematch_rounds`` more times in alternating order
    (a, b, then b, a, ...), in one launch, and replace their rows by :func:`pooled` ones; what
    was done (None: no rematch; a spent budget is said in ``skipped``)."""
    auto = cfg.strategy
    if auto.rematch_rounds == 0 or auto.criterion != Criterion.measured:
        return None
    leaders = close_leaders(rows, auto.rematch_within)
    if leaders is None:
        return None
    a, b, why = leaders
    spent = over_budget(budget["spent_s"], budget.get("best_run_s"), budget)
    if spent is not None:
        print(f"[auto] no rematch of {a} and {b} ({why}): {spent}", flush=True)
        return {"between": [a, b], "why": why, "rounds": 0, "order": [], "skipped": spent}
    print(f"[auto] rematch {a} and {b}: {why}; {auto.rematch_rounds} more profile(s) each, "
          "alternating, in one launch", flush=True)
    order = [name for r in range(auto.rematch_rounds) for name in ((a, b) if r % 2 == 0
                                                                    else (b, a))]
    tags = [f"rematch{k // 2 + 1}" for k in range(len(order))]
    more: dict[str, list[dict]] = {a: [], b: []}
    again = profile_all(cfg, list(zip(order, tags, strict=True)), run_dir, loss0, profile,
                        budget, reorder=False)
    for r, (name, row) in enumerate(zip(order, again, strict=True)):
        if row.get("status") == "ran":
            more[name].append(row)
        else:  # its first profile stands; the pooled figure uses the runs that ran
            print(f"[auto] {name}: {tags[r]} {row['status']} ({row.get('reason')}); "
                  "pooling the profiles that ran", flush=True)
    for i, row in enumerate(rows):
        if row["name"] in more:
            rows[i] = pooled(row, more[row["name"]])
    return {"between": [a, b], "why": why, "rounds": auto.rematch_rounds, "order": order}


# -- profiling --------------------------------------------------------------------------------
def initial_loss(cfg: DictConfig, task: Task, graph: GraphStore, group: Any = None) -> float:
    """The training loss of the initial parameters a candidate (``cfg``: its config, the model
    options settled) starts from, on every training item of ``task`` (prepared: ``graph`` is
    the graph it trains on). The model is built as the ranks build it
    (:func:`~gnnscale.strategies.base.build_model`: the same seed, the task's head attached)
    and the loss is the task's own (:meth:`~gnnscale.tasks.base.Task.initial_loss`: node
    classification's cross-entropy, link prediction's binary cross-entropy of the training
    edges and the negatives epoch 0 draws), measured as training measures it: in training
    mode, with the run's keyed dropout of epoch 0. Collective under a process group: in a
    profile launch every rank computes its share (``group``: every rank when None)."""
    from gnnscale.distributed.launch import private_temp_dir
    from gnnscale.strategies.base import build_model

    with private_temp_dir():
        model = cast("GNN", build_model(cfg, graph, task))  # a model of gnnscale/models
    model.set_dropout_key(cfg.seed, 0)
    return task.initial_loss(model, graph, batch_size=cfg.eval_batch_size, group=group)


def profile_row(name: str, ccfg: DictConfig, results: dict, auto: DictConfig) -> dict:
    """The figures :func:`choose` reads, from a finished profile (``results["profile"]``:
    the candidate's initial loss, computed in the launch): per profiled epoch (a sampling
    candidate's cut to ``window_steps`` of its ``steps_per_epoch`` steps), the median time of
    those after the first and the loss drop."""
    hist = results["history"]
    times = [h["epoch_time"] for h in hist]
    prof = results["profile"]
    loss0 = prof["initial_loss"]
    row = {"name": name, "status": "ran", "run_dir": str(ccfg.run_dir), "initial_loss": loss0,
           "epoch_time": statistics.median(times[1:] if len(times) > 1 else times),
           "epoch_times": times, "losses": [h["train_loss"] for h in hist],
           "loss_drop_per_epoch": (loss0 - hist[-1]["train_loss"]) / len(hist),
           **{k: prof[k] for k in ("window_steps", "steps_per_epoch", "setup_s", "seconds",
                                   "projected_run_s", "task", "loss") if k in prof}}
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


def candidate_job(cfg: DictConfig, name: str, run_dir: Path, loss0: dict[str, float],
                  tag: str = "") -> tuple[dict, dict | None]:
    """One candidate's row so far and its profile job (``<run_dir>/auto/<name>[-<tag>]``:
    ``profile_epochs`` epochs, no evaluation, no checkpoint; its initial loss ``loss0[name]``
    when known, else computed in the launch; None when its config is refused, which the row
    then says)."""
    from gnnscale.compare.runs import option_name

    row: dict[str, Any] = {"name": name}
    try:
        where = run_dir / "auto" / (f"{name}-{tag}" if tag else name)
        ccfg = candidate_config(cfg, name, where, cfg.strategy.profile_epochs)
        row.update(deps=option_name(ccfg.deps._target_), cache=option_name(ccfg.cache._target_))
        with_flags = cast(DictConfig, OmegaConf.merge(ccfg, {
            "eval_every": -1, "checkpoint": False, "resume": False,
            "logger": option_node("logger", "none")}))
        run_epochs = int(candidate_config(cfg, name, where, _epochs(cfg)).epochs)
    except ConfigError as err:
        print(f"[auto] {name}: refused: {err}", flush=True)
        return {**row, "status": "refused", "reason": str(err)}, None
    return row, {"name": name, "cfg": with_flags, "loss0": loss0.get(name),
                 "run_epochs": run_epochs}


def profile_all(cfg: DictConfig, specs: list[tuple[str, str]], run_dir: Path,
                loss0: dict[str, float], profile: Profile, budget: dict[str, Any],
                reorder: bool = True) -> list[dict]:
    """Rows of the candidates ``specs`` (name, tag), profiled in one launch (``profile``: the
    runner's :func:`~gnnscale.runner.profile.profile_configs`), in ``specs``' order; each
    initial loss computed there is added to ``loss0``; with
    ``reorder`` the sampling candidates are profiled first (a few mini-batch steps each, where
    a full-graph epoch is a pass over the whole graph), so the budget's projection of the run
    comes from a cheap profile."""
    rows: list[dict] = []
    jobs: list[tuple[int, dict]] = []
    for name, tag in specs:
        row, job = candidate_job(cfg, name, run_dir, loss0, tag)
        rows.append(row)
        if job is not None:
            jobs.append((len(rows) - 1, job))
    if reorder:
        jobs.sort(key=lambda ij: not declared(ij[1]["cfg"].strategy).samples)
    outcomes = profile([job for _, job in jobs], cfg.strategy.profile_steps, budget)
    for (i, job), outcome in zip(jobs, outcomes, strict=True):
        if outcome["status"] == "ran":
            rows[i].update(profile_row(job["name"], job["cfg"], outcome["results"],
                                       cfg.strategy))
            loss0.setdefault(job["name"], rows[i]["initial_loss"])
        else:
            rows[i].update(status=outcome["status"], reason=outcome["reason"])
    return rows


def profiling_plan(cfg: DictConfig, names: list[str]) -> str:
    """The line ``auto`` says before it profiles: the candidates, one launch, how many steps
    each, the budget, and what trains after."""
    auto, epochs = cfg.strategy, _epochs(cfg)
    more = (f"; up to {2 * auto.rematch_rounds} more profiles in a second launch if the two "
            "best are close" if auto.rematch_rounds and auto.criterion == Criterion.measured
            else "")
    steps = (f"a sampling candidate's cut to its first {auto.profile_steps} steps"
             if auto.profile_steps is not None else "whole epochs")
    if auto.profile_s is not None:
        budget = f"at most {auto.profile_s:g} s of profiling (strategy.profile_s)"
    elif auto.profile_share is not None:
        share = auto.profile_share
        budget = (f"at most {share:.0%} of the run: no candidate starts once profiling has "
                  f"taken {share / (1 - share):.2g}x the best one's projected training "
                  "(strategy.profile_share)")
    else:
        budget = "none (every candidate is profiled)"
    then = f"{epochs} epochs" if epochs is not None else "its strategy's default epochs"
    return (f"[auto] profiling {len(names)} candidates ({', '.join(names)}) in one launch: "
            f"{auto.profile_epochs} epochs each ({steps}; the first a warm-up; no evaluation)"
            f"{more}; budget: {budget}; then the pick trains {then}")


def _epochs(cfg: DictConfig) -> int | None:
    """The chosen run's ``epochs``: the user's, or None (left to the chosen strategy's own
    default, ``StrategyConfig.default_epochs``)."""
    return None if epochs_left(cfg) else int(cfg.epochs)


def recorded_choice(cfg: DictConfig, run_dir: Path) -> str | None:
    """On ``resume=true`` with a checkpoint in ``run_dir``: the strategy ``auto.json`` says was
    chosen (the one the checkpoint is of); None otherwise."""
    decision = run_dir / "auto.json"
    if not (cfg.resume and decision.is_file() and (run_dir / "checkpoint.pt").is_file()):
        return None
    return json.loads(decision.read_text()).get("chosen")


def run_auto(cfg: DictConfig, train: Train, profile: Profile | None = None) -> dict:
    """Profile every candidate in one launch (``profile``: the runner's), write ``auto.json``,
    train the chosen one; its results. ``train`` runs one concrete config (validation
    included) and returns its results."""
    check_auto(cfg)
    run_dir = Path(cast(dict, OmegaConf.to_container(cfg, resolve=True))["run_dir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    resumed = recorded_choice(cfg, run_dir)
    if resumed is not None:
        print(f"[auto] resuming {resumed}, the strategy {run_dir / 'auto.json'} records",
              flush=True)
        results = train(candidate_config(cfg, resumed, run_dir, _epochs(cfg)))
        results["auto"] = {"strategy": resumed, "chosen_by": "auto", "resumed": True,
                           "decision": "auto.json"}
        (run_dir / "results.json").write_text(json.dumps(results, indent=1))
        return results
    if profile is None:
        raise ConfigError("strategy=auto profiles its candidates through the runner: run it "
                          "with gnnscale.runner.run.run (train.py, gnnscale.train)")
    names = chosen_candidates(cfg)
    print(profiling_plan(cfg, names), flush=True)
    t0 = time.perf_counter()
    auto = cfg.strategy
    budget: dict[str, Any] = {"profile_s": auto.profile_s, "share": auto.profile_share,
                              "spent_s": 0.0, "best_run_s": None, "best_score": None}
    loss0: dict[str, float] = {}
    rows = profile_all(cfg, [(name, "") for name in names], run_dir, loss0, profile, budget)
    phases = {"launch": time.perf_counter() - t0, "in_ranks": budget["spent_s"]}
    ran = next((r for r in rows if r.get("status") == "ran"), None)
    which_task = ran["task"] if ran else declared_task(cfg).name
    loss = ran["loss"] if ran else "the training loss"
    common = set(loss0.values())  # one figure when every candidate starts from one model
    decision = {"criterion": str(auto.criterion.value if isinstance(auto.criterion, Enum)
                                 else auto.criterion),
                "hardware": auto.hardware, "profile_epochs": auto.profile_epochs,
                "profile_steps": auto.profile_steps, "profile_s": auto.profile_s,
                "profile_share": auto.profile_share,
                "task": which_task, "loss": loss,
                "initial_loss": common.pop() if len(common) == 1 else None,
                "initial_losses": loss0, "candidates": rows,
                "chosen": None, "why": None, "rematch": None}
    try:
        decision["rematch"] = rematch(cfg, rows, run_dir, loss0, profile, budget)
        chosen, why = choose(rows, decision["criterion"], which_task)
        if decision["rematch"] is not None and decision["rematch"]["rounds"]:
            why += (f"; after a rematch of {' and '.join(decision['rematch']['between'])} "
                    f"({decision['rematch']['rounds']} more profiles each, alternating)")
    finally:
        decision["profile_seconds"] = time.perf_counter() - t0
        decision["profile_phases"] = phases
        (run_dir / "auto.json").write_text(json.dumps(decision, indent=1))
    decision.update(chosen=chosen, why=why)
    (run_dir / "auto.json").write_text(json.dumps(decision, indent=1))
    first = (f"{decision['initial_loss']:.3f}" if decision["initial_loss"] is not None else
             "each candidate's own: " + ", ".join(f"{n} {v:.3f}" for n, v in loss0.items()))
    print(f"\n[auto] decision after {decision['profile_seconds']:.1f} s of profiling "
          f"(task={which_task}, training loss = {loss}, initial {first}; score = "
          f"{decision['criterion']} s per profiled epoch / loss drop per profiled epoch):\n"
          f"{table(rows, chosen)}\n[auto] chose {why}\n", flush=True)
    results = train(candidate_config(cfg, chosen, run_dir, _epochs(cfg)))
    results["auto"] = {"strategy": chosen, "chosen_by": "auto", "why": why,
                       "criterion": decision["criterion"], "task": which_task,
                       "decision": "auto.json",
                       "profile_seconds": decision["profile_seconds"]}
    (run_dir / "results.json").write_text(json.dumps(results, indent=1))
    return results
