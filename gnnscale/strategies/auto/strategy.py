"""``strategy=auto``: profile the strategies that can run a config, pick one, train with it.

The candidates are the registry's: every option of the ``strategy`` config group whose class
says it may be profiled (:meth:`~gnnscale.strategies.base.Strategy.why_not_candidate`), or
``strategy.candidates`` when given. For each, the launcher composes the config that
``strategy=<candidate>`` would give (every other group and key as the user gave them; deps and
cache the user left unset are the candidate's :meth:`preferred` ones), runs it through the
normal validation (a refusal is logged with its reason and the candidate skipped), and trains
it for ``strategy.profile_epochs`` epochs with the normal runner, real ranks, in
``<run_dir>/auto/<candidate>``. The choice rule is :func:`~.choice.choose`: seconds per unit of
decrease of the run's task's own training loss (node classification, link prediction: any task
whose declarations say ``auto_rankable``), from the initial loss the task computes
(:func:`initial_loss`) for each candidate's own model (the same seed and initial parameters,
with the model options its strategy settles, e.g. GCN's normalisation: :func:`initial_losses`);
the decision table and one line of the pick and why are printed and
the table written to ``<run_dir>/auto.json``; then the chosen config trains for
``epochs`` in ``<run_dir>`` and its ``results.json`` carries an ``auto`` entry saying so. On
``resume=true`` with a checkpoint in ``<run_dir>``, the recorded choice trains on, unprofiled.
"""

from __future__ import annotations

import json
import statistics
import traceback
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from omegaconf import DictConfig, OmegaConf

from gnnscale.errors import ConfigError
from gnnscale.strategies.auto.candidates import candidate_config, option_node
from gnnscale.strategies.auto.choice import choose, close_leaders, pooled, seconds_per_loss, table
from gnnscale.strategies.auto.config import AutoConfig, Criterion, check_auto, chosen_candidates
from gnnscale.strategies.base import Strategy
from gnnscale.strategies.config import epochs_left

if TYPE_CHECKING:
    from gnnscale.data.graph import GraphStore
    from gnnscale.models.base import GNN
    from gnnscale.tasks.base import Task

Train = Callable[[DictConfig], dict]


class Auto(Strategy):
    """A meta strategy: resolved in the launcher into profile runs and one chosen run."""

    schema = AutoConfig

    def __init__(self, *_: Any, **__: Any) -> None:
        raise ConfigError("strategy=auto is resolved by the launcher into a concrete strategy "
                          "before any rank starts; it cannot be built in a rank")

    @classmethod
    def train_meta(cls, cfg: DictConfig, train: Train) -> dict:
        """Profile the candidates, choose, train the chosen one (see :func:`run_auto`)."""
        return run_auto(cfg, train)

    def setup(self) -> None:  # never built
        """Never called: a meta strategy is not built in a rank."""
        raise NotImplementedError

    def train_epoch(self, epoch: int, progress: Any = None) -> dict[str, float]:
        """Never called: a meta strategy is not built in a rank."""
        raise NotImplementedError


def rematch(cfg: DictConfig, rows: list[dict], run_dir: Path, loss0: dict[str, float],
            train: Train) -> dict[str, Any] | None:
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
            row = profile(cfg, name, run_dir, loss0, train, tag=f"rematch{r + 1}")
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
def initial_losses(cfg: DictConfig, names: list[str], run_dir: Path, task: Task,
                   graph: GraphStore) -> dict[str, float]:
    """Each candidate's :func:`initial_loss`, from its own config (:func:`candidate_config`:
    the model options its strategy settles); computed once per distinct model. A candidate
    whose config is refused has none (its profile is refused too)."""
    by_model: dict[str, float] = {}
    out = {}
    for name in names:
        try:
            ccfg = candidate_config(cfg, name, run_dir / "auto" / name, 1)
        except ConfigError:
            continue
        key = json.dumps(OmegaConf.to_container(ccfg.model, resolve=True, enum_to_str=True),
                         sort_keys=True, default=str)
        if key not in by_model:
            by_model[key] = initial_loss(ccfg, task, graph)
        out[name] = by_model[key]
    return out


def initial_loss(cfg: DictConfig, task: Task, graph: GraphStore) -> float:
    """The training loss of the initial parameters a candidate (``cfg``: its config, the model
    options settled) starts from, on every training item of ``task`` (prepared: ``graph`` is
    the graph it trains on). The model is built as the ranks build it
    (:func:`~gnnscale.strategies.base.build_model`: the same seed, the task's head attached)
    and the loss is the task's own (:meth:`~gnnscale.tasks.base.Task.initial_loss`: node
    classification's cross-entropy, link prediction's binary cross-entropy of the training
    edges and the negatives epoch 0 draws), measured as training measures it: in training
    mode, with the run's keyed dropout of epoch 0."""
    from gnnscale.distributed.launch import private_temp_dir
    from gnnscale.strategies.base import build_model

    with private_temp_dir():
        model = cast("GNN", build_model(cfg, graph, task))  # a model of gnnscale/models
    model.set_dropout_key(cfg.seed, 0)
    return task.initial_loss(model, graph, batch_size=cfg.eval_batch_size)


def profile_row(name: str, ccfg: DictConfig, results: dict, loss0: float, auto) -> dict:
    """The figures :func:`choose` reads, from a finished profile run (``loss0``: the
    candidate's initial loss)."""
    hist = results["history"]
    times = [h["epoch_time"] for h in hist]
    row = {"name": name, "status": "ran", "run_dir": str(ccfg.run_dir), "initial_loss": loss0,
           "epoch_time": statistics.median(times[1:] if len(times) > 1 else times),
           "epoch_times": times, "losses": [h["train_loss"] for h in hist],
           "loss_drop_per_epoch": (loss0 - hist[-1]["train_loss"]) / len(hist)}
    metric = results["summary"].get("metric")  # the task's selection metric (acc, auc, ...)
    if metric:
        row[f"val_{metric}"] = results["summary"].get(f"final_val_{metric}")
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


def profile(cfg: DictConfig, name: str, run_dir: Path, loss0: dict[str, float], train: Train,
            tag: str = "") -> dict:
    """Validate and profile one candidate (in ``<run_dir>/auto/<name>[-<tag>]``) through
    ``train``, its loss drop counted from its own initial loss (``loss0[name]``); a row with
    status ran, refused or crashed."""
    from gnnscale.compare.runs import option_name

    row: dict[str, Any] = {"name": name}
    try:
        where = run_dir / "auto" / (f"{name}-{tag}" if tag else name)
        ccfg = candidate_config(cfg, name, where, cfg.strategy.profile_epochs)
        row.update(deps=option_name(ccfg.deps._target_), cache=option_name(ccfg.cache._target_))
        with_flags = cast(DictConfig, OmegaConf.merge(ccfg, {"eval_every": 0, "checkpoint": False,
                                            "resume": False,
                                            "logger": option_node("logger", "none")}))
    except ConfigError as err:
        print(f"[auto] {name}: refused: {err}", flush=True)
        return {**row, "status": "refused", "reason": str(err)}
    print(f"[auto] {name}: profiling {cfg.strategy.profile_epochs} epoch(s) in "
          f"{with_flags.run_dir}", flush=True)
    try:
        results = train(with_flags)  # validates first: a ConfigError is a refusal
        return {**row, **profile_row(name, with_flags, results, loss0[name], cfg.strategy)}
    except ConfigError as err:
        print(f"[auto] {name}: refused: {err}", flush=True)
        return {**row, "status": "refused", "reason": str(err)}
    except Exception as err:  # noqa: BLE001 - a crashing candidate must not end the others
        trace = traceback.format_exc()
        Path(with_flags.run_dir, "crash.txt").write_text(trace)
        print(f"[auto] {name}: CRASHED ({type(err).__name__}: {err}); traceback in "
              f"{with_flags.run_dir}/crash.txt\n{trace}", flush=True)
        return {**row, "status": "crashed", "reason": f"{type(err).__name__}: {err}"}


def profiling_plan(cfg: DictConfig, names: list[str]) -> str:
    """The line ``auto`` says before it profiles: how many launches of how many epochs, and
    what trains after."""
    auto, epochs = cfg.strategy, _epochs(cfg)
    more = (f", and up to {2 * auto.rematch_rounds} more if the two best are close"
            if auto.rematch_rounds and auto.criterion == Criterion.measured else "")
    then = f"{epochs} epochs" if epochs is not None else "its strategy's default epochs"
    return (f"[auto] profiling {len(names)} candidates ({', '.join(names)}): one launch of "
            f"{auto.profile_epochs} epochs each{more}; then the pick trains {then}")


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


def run_auto(cfg: DictConfig, train: Train) -> dict:
    """Profile every candidate, write ``auto.json``, train the chosen one; its results.
    ``train`` runs one concrete config (validation included) and returns its results."""
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
    from gnnscale.strategies.base import build_task

    names = chosen_candidates(cfg)
    print(profiling_plan(cfg, names), flush=True)
    task, graph = build_task(cfg)
    loss0 = initial_losses(cfg, names, run_dir, task, graph)
    which_task, loss = task.name, task.loss_name
    del task, graph
    auto = cfg.strategy
    rows = [profile(cfg, name, run_dir, loss0, train) for name in names]
    common = set(loss0.values())  # one figure when every candidate starts from one model
    decision = {"criterion": str(auto.criterion.value if isinstance(auto.criterion, Enum)
                                 else auto.criterion),
                "hardware": auto.hardware, "profile_epochs": auto.profile_epochs,
                "task": which_task, "loss": loss,
                "initial_loss": common.pop() if len(common) == 1 else None,
                "initial_losses": loss0, "candidates": rows,
                "chosen": None, "why": None, "rematch": None}
    try:
        decision["rematch"] = rematch(cfg, rows, run_dir, loss0, train)
        chosen, why = choose(rows, decision["criterion"], which_task)
        if decision["rematch"] is not None:
            why += (f"; after a rematch of {' and '.join(decision['rematch']['between'])} "
                    f"({decision['rematch']['rounds']} more profiles each, alternating)")
    finally:
        (run_dir / "auto.json").write_text(json.dumps(decision, indent=1))
    decision.update(chosen=chosen, why=why)
    (run_dir / "auto.json").write_text(json.dumps(decision, indent=1))
    first = (f"{decision['initial_loss']:.3f}" if decision["initial_loss"] is not None else
             "each candidate's own: " + ", ".join(f"{n} {v:.3f}" for n, v in loss0.items()))
    print(f"\n[auto] decision (task={which_task}, training loss = {loss}, initial "
          f"{first}; score = {decision['criterion']} s/epoch / loss drop per epoch):\n"
          f"{table(rows, chosen)}\n[auto] chose {why}\n", flush=True)
    results = train(candidate_config(cfg, chosen, run_dir, _epochs(cfg)))
    results["auto"] = {"strategy": chosen, "chosen_by": "auto", "why": why,
                       "criterion": decision["criterion"], "task": which_task,
                       "decision": "auto.json"}
    (run_dir / "results.json").write_text(json.dumps(results, indent=1))
    return results
