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
(with ``profile_seconds``), all on rank 0 of the profile launch (:class:`Decider`); then, in the
same launch, the ranks build the chosen config's own run from scratch (fresh parameters, as
``strategy=<pick>`` would) and train it for ``epochs`` in ``<run_dir>``; its ``results.json``
carries an ``auto`` entry saying so. On ``resume=true`` with a checkpoint
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
#: ``(jobs, steps, budget, decide=...) -> {"outcomes": ..., "final": ...}``
Profile = Callable[..., dict]


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
                                   "projected_run_s", "task", "loss", "initial_loss_s",
                                   "ended_early") if k in prof}}
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
    when known, else computed in the launch; ``run_cfg``: its own run in ``run_dir``, trained
    when chosen; None when its config is refused, which the row then says)."""
    from gnnscale.compare.runs import option_name

    row: dict[str, Any] = {"name": name}
    try:
        where = run_dir / "auto" / (f"{name}-{tag}" if tag else name)
        ccfg = candidate_config(cfg, name, where, cfg.strategy.profile_epochs)
        row.update(deps=option_name(ccfg.deps._target_), cache=option_name(ccfg.cache._target_))
        with_flags = cast(DictConfig, OmegaConf.merge(ccfg, {
            "eval_every": -1, "checkpoint": False, "resume": False,
            "logger": option_node("logger", "none")}))
        run_cfg = candidate_config(cfg, name, run_dir, _epochs(cfg))
        run_epochs = int(run_cfg.epochs)
    except ConfigError as err:
        print(f"[auto] {name}: refused: {err}", flush=True)
        return {**row, "status": "refused", "reason": str(err)}, None
    return row, {"name": name, "cfg": with_flags, "loss0": loss0.get(name),
                 "run_epochs": run_epochs, "run_cfg": run_cfg}


def profiling_plan(cfg: DictConfig, names: list[str]) -> str:
    """The line ``auto`` says before it profiles: the candidates, one launch, how many steps
    each, the budget, and what trains after."""
    auto, epochs = cfg.strategy, _epochs(cfg)
    more = (f"; up to {2 * auto.rematch_rounds} more profiles if the two best are close"
            if auto.rematch_rounds and auto.criterion == Criterion.measured else "")
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
    if auto.profile_s is not None or auto.profile_share is not None:
        budget += (", and the first candidate's profile ends at the first epoch past it "
                   "whose loss is below the initial one")
    then = f"{epochs} epochs" if epochs is not None else "its strategy's default epochs"
    return (f"[auto] profiling {len(names)} candidates ({', '.join(names)}) in one launch: "
            f"{auto.profile_epochs} epochs each ({steps}; the first a warm-up; no evaluation)"
            f"{more}; budget: {budget}; then the pick trains {then} in the same launch")


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


class Decider:
    """The choice, run on rank 0 of the profile launch once every candidate is profiled
    (:func:`~gnnscale.runner.profile.profile_configs`' ``decide``): the rows from the outcomes,
    a rematch of close leaders (more profiles, in the same launch), the pick by :func:`choose`,
    the decision table printed and ``auto.json`` written; its answer, what the ranks do next.
    ``rows``: every candidate's row so far (the refused ones said); ``jobs``: the profiled
    candidates' jobs, in launch order, each with ``row`` (its row's index); ``started``: the
    wall clock at the plan line."""

    def __init__(self, cfg: DictConfig, run_dir: Path, rows: list[dict], jobs: list[dict],
                 started: float) -> None:
        self.cfg, self.run_dir, self.rows, self.started = cfg, run_dir, rows, started
        self.names = [job["name"] for job in jobs]
        self.run_epochs = {job["name"]: job["run_epochs"] for job in jobs}
        self.where = [job["row"] for job in jobs]
        self.profile_cfgs: dict[str, dict] = {
            job["name"]: cast(dict, OmegaConf.to_container(job["cfg"], resolve=True,
                                                           enum_to_str=True))
            for job in jobs}
        self.loss0: dict[str, float] = {}
        self.order: list[str] = []
        self.decision: dict[str, Any] = {}

    def __call__(self, outcomes: list[dict], budget: dict[str, Any]) -> dict[str, Any]:
        """What the ranks do next: ``{"profile": jobs}`` (a rematch), ``{"train": index}``
        (the chosen job) or ``{"stop": reason}`` (nothing ran and decreased the loss)."""
        if not self.decision:  # the first profiles
            self._fill(outcomes)
            self.decision = self._record(budget)
            again = self._rematch(budget)
            if again is not None:
                return {"profile": again}
        else:  # the rematch profiles, in self.order
            self._pool(outcomes)
        try:
            chosen, why = choose(self.rows, self.decision["criterion"], self.decision["task"])
        except ConfigError as err:
            self._write(budget)
            return {"stop": str(err)}
        rematched = self.decision["rematch"]
        if rematched is not None and rematched["rounds"]:
            why += (f"; after a rematch of {' and '.join(rematched['between'])} "
                    f"({rematched['rounds']} more profiles each, alternating)")
        self.decision.update(chosen=chosen, why=why)
        self._write(budget)
        d, loss0 = self.decision, self.loss0
        first = (f"{d['initial_loss']:.3f}" if d["initial_loss"] is not None else
                 "each candidate's own: " + ", ".join(f"{n} {v:.3f}" for n, v in loss0.items()))
        print(f"\n[auto] decision after {d['profile_seconds']:.1f} s of profiling "
              f"(task={d['task']}, training loss = {d['loss']}, initial {first}; score = "
              f"{d['criterion']} s per profiled epoch / loss drop per profiled epoch):\n"
              f"{table(self.rows, chosen)}\n[auto] chose {why}\n[auto] {chosen} trains now, "
              "in this launch, from fresh parameters\n", flush=True)
        return {"train": self.names.index(chosen)}

    def _fill(self, outcomes: list[dict]) -> None:
        """Each profiled candidate's row from its outcome; its initial loss kept."""
        for name, i, outcome in zip(self.names, self.where, outcomes, strict=True):
            if outcome["status"] == "ran":
                ccfg = cast(DictConfig, OmegaConf.create(self.profile_cfgs[name]))
                self.rows[i].update(profile_row(name, ccfg, outcome["results"],
                                                self.cfg.strategy))
                self.loss0.setdefault(name, self.rows[i]["initial_loss"])
            else:
                self.rows[i].update(status=outcome["status"], reason=outcome["reason"])

    def _record(self, budget: dict[str, Any]) -> dict[str, Any]:
        """The decision record so far (``auto.json``'s keys)."""
        auto = self.cfg.strategy
        ran = next((r for r in self.rows if r.get("status") == "ran"), None)
        common = set(self.loss0.values())  # one figure when every candidate starts alike
        return {"criterion": str(auto.criterion.value if isinstance(auto.criterion, Enum)
                                 else auto.criterion),
                "hardware": auto.hardware, "profile_epochs": auto.profile_epochs,
                "profile_steps": auto.profile_steps, "profile_s": auto.profile_s,
                "profile_share": auto.profile_share,
                "task": ran["task"] if ran else declared_task(self.cfg).name,
                "loss": ran["loss"] if ran else "the training loss",
                "initial_loss": common.pop() if len(common) == 1 else None,
                "initial_losses": dict(self.loss0), "candidates": self.rows,
                "chosen": None, "why": None, "rematch": None}

    def _rematch(self, budget: dict[str, Any]) -> list[dict] | None:
        """The rematch's jobs: the two close leaders ``rematch_rounds`` more times each in
        alternating order (a, b, then b, a, ...); None when there is none (a spent budget is
        said in the record's ``skipped``)."""
        auto = self.cfg.strategy
        if auto.rematch_rounds == 0 or auto.criterion != Criterion.measured:
            return None
        leaders = close_leaders(self.rows, auto.rematch_within)
        if leaders is None:
            return None
        a, b, why = leaders
        spent = over_budget(budget["spent_s"], budget.get("best_run_s"), budget)
        if spent is not None:
            print(f"[auto] no rematch of {a} and {b} ({why}): {spent}", flush=True)
            self.decision["rematch"] = {"between": [a, b], "why": why, "rounds": 0,
                                        "order": [], "skipped": spent}
            return None
        print(f"[auto] rematch {a} and {b}: {why}; {auto.rematch_rounds} more profile(s) "
              "each, alternating, in this launch", flush=True)
        self.order = [name for r in range(auto.rematch_rounds)
                      for name in ((a, b) if r % 2 == 0 else (b, a))]
        self.decision["rematch"] = {"between": [a, b], "why": why,
                                    "rounds": auto.rematch_rounds, "order": self.order}
        jobs = []
        for k, name in enumerate(self.order):
            where = self.run_dir / "auto" / f"{name}-rematch{k // 2 + 1}"
            where.mkdir(parents=True, exist_ok=True)
            (where / "results.json").unlink(missing_ok=True)
            cfg = {**self.profile_cfgs[name], "run_dir": str(where)}
            jobs.append({"name": name, "cfg": cfg, "loss0": self.loss0[name],
                         "run_epochs": self.run_epochs[name]})
        return jobs

    def _pool(self, outcomes: list[dict]) -> None:
        """The leaders' rows over their first profile and the rematch's that ran."""
        more: dict[str, list[dict]] = {name: [] for name in self.order}
        for k, (name, outcome) in enumerate(zip(self.order, outcomes, strict=True)):
            if outcome["status"] == "ran":
                cfg = {**self.profile_cfgs[name], "run_dir": outcome["results"]["config"][
                    "run_dir"]}
                more[name].append(profile_row(name, cast(DictConfig, OmegaConf.create(cfg)),
                                              outcome["results"], self.cfg.strategy))
            else:  # its first profile stands; the pooled figure uses the runs that ran
                print(f"[auto] {name}: rematch{k // 2 + 1} {outcome['status']} "
                      f"({outcome.get('reason')}); pooling the profiles that ran", flush=True)
        for i, row in enumerate(self.rows):
            if row["name"] in more:
                self.rows[i] = pooled(row, more[row["name"]])
        self.decision["candidates"] = self.rows

    def _write(self, budget: dict[str, Any]) -> None:
        """``auto.json``, with the profiling's seconds (plan line to decision) and phases:
        the candidates' configs composed, checked, the ranks' start (fork, process group) and
        their profiling (initial losses, set-ups and profiled epochs within it)."""
        ran = [r for r in self.rows if r.get("status") == "ran"]
        self.decision["profile_seconds"] = time.time() - self.started
        self.decision["profile_phases"] = {
            "compose": budget.get("compose_s"), "launcher_checks": budget.get("checks_s"),
            "ranks_start": budget.get("ranks_start_s"), "in_ranks": budget["spent_s"],
            "initial_losses": sum(r.get("initial_loss_s", 0.0) for r in ran),
            "candidate_setups": sum(r.get("setup_s", 0.0) for r in ran),
            "profiled_epochs": sum(sum(r["epoch_times"]) for r in ran)}
        (self.run_dir / "auto.json").write_text(json.dumps(self.decision, indent=1))


def run_auto(cfg: DictConfig, train: Train, profile: Profile | None = None) -> dict:
    """Profile every candidate, choose and train the pick, all in one launch (``profile``: the
    runner's, given a :class:`Decider`); ``auto.json`` written at the decision; the pick's
    results. ``train`` runs one concrete config (validation included) and returns its results:
    a resumed run's recorded choice."""
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
    started, t0 = time.time(), time.perf_counter()
    auto = cfg.strategy
    budget: dict[str, Any] = {"profile_s": auto.profile_s, "share": auto.profile_share,
                              "spent_s": 0.0, "best_run_s": None, "best_score": None}
    rows: list[dict] = []
    jobs: list[dict] = []
    for name in names:
        row, job = candidate_job(cfg, name, run_dir, {})
        rows.append(row)
        if job is not None:
            jobs.append({**job, "row": len(rows) - 1})
    # the sampling candidates first: a few mini-batch steps each, where a full-graph epoch
    # is a pass over the whole graph, so the budget's projection comes from a cheap profile
    jobs.sort(key=lambda job: not declared(job["cfg"].strategy).samples)
    budget["compose_s"] = time.perf_counter() - t0
    got = profile(jobs, auto.profile_steps, budget,
                  decide=Decider(cfg, run_dir, rows, jobs, started))
    final = got["final"]
    decider, action = final["decider"], final["action"]
    if "stop" in action:
        raise ConfigError(action["stop"])
    decision = decider.decision
    job = jobs[action["train"]]
    results = final["results"]
    results["startup"] = {"auto_before_pick": time.perf_counter() - t0,
                          **results.get("startup", {})}
    results["settled"] = dict(job["plan"].settled)
    results["auto"] = {"strategy": decision["chosen"], "chosen_by": "auto",
                       "why": decision["why"], "criterion": decision["criterion"],
                       "task": decision["task"], "decision": "auto.json",
                       "profile_seconds": decision["profile_seconds"]}
    (run_dir / "results.json").write_text(json.dumps(results, indent=1))
    return results
