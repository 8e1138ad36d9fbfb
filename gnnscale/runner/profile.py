"""Profile several concrete configs in ONE launch of the ranks (``strategy=auto``'s candidates).

The launcher checks each config as a run of it would (:func:`check_config`, the data step,
:func:`validate_data`: a refusal is that config's row, before any rank starts), then starts the
ranks once. Every rank loads the dataset and builds each config in turn on the same process
group (its own model, sampler, cache, dependency manager and strategy, set up as its run sets
them up: partitions, caches and plans included), trains it for its ``epochs`` (a sampling
strategy's epochs cut to their first ``steps`` mini-batches by its schedule, the same
permutation; no evaluation, no checkpoint), closes it and goes on to the next: one spawn and
one process group for all of them. Rank 0 writes each config's ``results.json`` in its run
folder as soon as it is done.

The budget: before each config starts, rank 0 decides (broadcast to every rank) whether
profiling has spent its budget: ``profile_s`` seconds, or else ``share / (1 - share)`` of the
projected training of the best-scored config so far (its epochs, each its steps per epoch at
its measured seconds per step), so that profiling takes at most ``share`` of the whole run; the
configs left are skipped, each row saying so. A config that crashes a rank ends the launch; the
launcher records it as crashed (its traceback in ``crash.txt``) and launches again for the
configs after it.

The choice and the chosen run happen in the same launch: given ``decide`` (``strategy=auto``'s
:class:`~gnnscale.strategies.auto.strategy.Decider`), rank 0 hands it every config's outcome
once the last is profiled; it answers (broadcast to every rank) with more profiles (a rematch,
profiled here too), a config to train, or a reason to stop. The ranks then build the chosen
config's run from scratch (:func:`gnnscale.runner.worker.rank_main`, with the plan the launcher
checked: fresh parameters, its own epochs, evaluation and checkpoints), so the pick trains
exactly as ``strategy=<pick>`` would, without a second launch of the ranks.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gnnscale import registry
from gnnscale.data.publish import write_text_atomic
from gnnscale.errors import ConfigError
from gnnscale.runner.phases import Phases
from gnnscale.runner.prepare import prepare_data
from gnnscale.runner.validate import check_config, validate
from gnnscale.strategies.auto.choice import over_budget, seconds_per_loss
from gnnscale.strategies.config import declared

#: what one job is: ``name`` (the strategy), ``cfg`` (its concrete config: ``epochs`` profiled
#: epochs, ``run_dir`` its folder), ``loss0`` (its initial loss), ``run_epochs`` (epochs its
#: own run would train: the budget's projection), ``run_cfg`` (its own run's config, trained
#: when chosen; with ``decide``)
Job = dict[str, Any]
#: ``strategy=auto``'s choice, run on rank 0: ``decide(outcomes, budget)`` -> an action
#: (``{"profile": [job, ...]}``, ``{"train": index}`` or ``{"stop": reason}``)
Decide = Callable[[list[dict], dict[str, Any]], dict[str, Any]]


def profile_configs(jobs: list[Job], steps: int | None, budget: dict[str, Any],
                    launch: Callable[[DictConfig], Any], decide: Decide | None = None
                    ) -> dict[str, Any]:
    """``outcomes``: each job's, in ``jobs``' order: ``{"status": "ran", "results": ...}`` (its
    ``results.json``), or ``refused``/``crashed``/``skipped`` with a ``reason``. ``budget``:
    ``profile_s``, ``share`` (see the module docstring), ``spent_s`` (seconds spent already,
    by an earlier launch), ``best_run_s`` and ``best_score`` (the best candidate's projected
    training and score so far, or None); it is updated with this launch's. ``launch``: the
    runner's launcher of a config's ``dist`` (:func:`~gnnscale.runner.run.launcher`). With
    ``decide``, also ``final``: rank 0's ``{"decider": ..., "chosen": index, "results": ...}``
    (the decider as it ended, the chosen job and its run's results, trained in the same
    launch), and each job's run config is checked here as its own run checks it (``plan``)."""
    out: list[dict | None] = [None] * len(jobs)
    ready: list[int] = []
    t0 = time.perf_counter()
    for i, job in enumerate(jobs):
        try:
            check_config(job["cfg"])
            plan = validate(job["run_cfg"] if decide is not None else job["cfg"],
                            prepare=prepare_data)
        except ConfigError as err:
            print(f"[auto] {job['name']}: refused: {err}", flush=True)
            out[i] = {"status": "refused", "reason": str(err)}
            continue
        if decide is not None:
            job["plan"] = plan
        Path(job["cfg"].run_dir).mkdir(parents=True, exist_ok=True)
        (Path(job["cfg"].run_dir) / "results.json").unlink(missing_ok=True)
        ready.append(i)
    budget["checks_s"] = time.perf_counter() - t0
    final: dict[str, Any] = {}
    if decide is not None and not ready:  # nothing to launch for: it says why it stops
        final = {"decider": decide, "action": decide(_filled(out), budget)}
    while ready or (decide is not None and not final):
        ready = _launch_once(jobs, ready, steps, budget, out, launch, decide, final)
    return {"outcomes": _filled(out), "final": final or None}


def _filled(out: list[dict | None]) -> list[dict]:
    """Every job's outcome, a job not reached ``skipped``."""
    return [o if o is not None else {"status": "skipped", "reason": "not profiled"} for o in out]


def _launch_once(jobs: list[Job], ready: list[int], steps: int | None, budget: dict[str, Any],
                 out: list[dict | None], launch: Callable[[DictConfig], Any],
                 decide: Decide | None = None, final: dict[str, Any] | None = None
                 ) -> list[int]:
    """One launch for the jobs ``ready`` (indices; with ``decide``, then the choice and the
    chosen run, into ``final``); fills ``out``; the jobs still to launch (after one that
    crashed), else []."""
    from gnnscale.distributed.threads import quiet_waits

    cfgs = [jobs[i]["cfg"] for i in ready] or [j["cfg"] for j in jobs if "plan" in j]
    binding = next((c for c in cfgs if declared(c.strategy).binds_cores), cfgs[0])
    ranks = launch(binding)
    payload = [_payload(job) for job in jobs]
    quiet_waits()
    t0 = time.perf_counter()
    budget["launched_at"] = time.time()  # rank 0 says how long the ranks took to start
    try:
        done = ranks.launch(profile_rank, payload, steps, dict(budget), ready, list(out),
                            decide)[0]
    except Exception as err:  # noqa: BLE001 - a crashing config must not end the others
        # RankFailed from spawned ranks; one rank (world_size=1) raises the error itself
        budget["spent_s"] = budget.get("spent_s", 0.0) + time.perf_counter() - t0
        first = next((k for k, i in enumerate(ready)
                      if not (Path(jobs[i]["cfg"].run_dir) / "results.json").is_file()),
                     len(ready))
        if first == len(ready):
            raise  # every job had finished: the launch itself (or the chosen run) failed
        for i in ready[:first]:
            out[i] = {"status": "ran", "results": json.loads(
                (Path(jobs[i]["cfg"].run_dir) / "results.json").read_text())}
        crashed = ready[first]
        where = Path(jobs[crashed]["cfg"].run_dir)
        (where / "crash.txt").write_text(f"{err}\n{traceback.format_exc()}")
        line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"[auto] {jobs[crashed]['name']}: CRASHED ({line}); traceback in "
              f"{where}/crash.txt", flush=True)
        out[crashed] = {"status": "crashed", "reason": f"{type(err).__name__}: {line}"}
        return ready[first + 1:]
    if done is None:  # a torchrun rank other than the leader (auto refuses torchrun)
        return []
    for i, outcome in zip(ready, done["jobs"], strict=True):
        out[i] = outcome
    budget.update(spent_s=done["spent_s"], best_run_s=done["best_run_s"],
                  best_score=done["best_score"])
    if final is not None and decide is not None:
        final.update(done["final"])
    return []


def _payload(job: Job) -> dict:
    """What the ranks get of one job: plain values, and its run's checked plan when known."""
    return {"name": job["name"], "loss0": job["loss0"], "run_epochs": job["run_epochs"],
            "cfg": OmegaConf.to_container(job["cfg"], resolve=True, enum_to_str=True),
            "plan": job.get("plan")}


def profile_rank(topo: Any, payload: list[dict], steps: int | None, budget: dict[str, Any],
                 ready: list[int] | None = None, prior: list[dict | None] | None = None,
                 decide: Decide | None = None) -> dict | None:
    """What every rank runs: each job of ``ready`` (indices of ``payload``; all when None) in
    turn on this process group (see the module docstring); then, with ``decide``, the choice
    (on rank 0, given ``prior``, the outcomes known before this launch, filled with this
    launch's) and what it says: more profiles, or the chosen job's run trained here. Rank 0
    returns the outcomes, the seconds spent, the best projected run and, with ``decide``,
    ``final`` (the decider, its last action and the chosen run's results)."""
    from gnnscale.runner.loggers.console import run_log

    leader = topo.rank == 0
    where = getattr(decide, "run_dir", None)  # auto's run folder: rank 0's lines in train.log
    with run_log(where, True) if leader and where is not None else nullcontext():
        return _profile_rank(topo, payload, steps, budget, ready, prior, decide)


def _profile_rank(topo: Any, payload: list[dict], steps: int | None, budget: dict[str, Any],
                  ready: list[int] | None, prior: list[dict | None] | None,
                  decide: Decide | None) -> dict | None:
    """:func:`profile_rank`'s work."""
    leader = topo.rank == 0
    if "launched_at" in budget:  # the fork (or spawn) and the process group's start
        budget["ranks_start_s"] = time.time() - budget["launched_at"]
    ready = list(range(len(payload))) if ready is None else ready
    state = {"spent0": float(budget.get("spent_s") or 0.0), "t0": time.perf_counter(),
             "best": budget.get("best_run_s"), "best_score": budget.get("best_score"),
             "profiled": any(o is not None and o["status"] == "ran" for o in prior or [])}
    losses: dict[str, float] = {}
    loaded: dict[str, Any] = {}
    outcomes = _profile_jobs(topo, [payload[i] for i in ready], steps, budget, state, losses,
                             loaded)
    final: dict[str, Any] | None = None
    if decide is not None:
        everything: list[dict | None] = (list(prior) if prior is not None
                                         else [None] * len(payload))
        if leader:
            for i, outcome in zip(ready, outcomes, strict=True):
                everything[i] = outcome
        final = _decide_and_train(topo, payload, steps, budget, state, losses, loaded,
                                  _filled(everything) if leader else [], decide)
    if not leader:
        return None
    return {"jobs": outcomes, "spent_s": _spent(state), "best_run_s": state["best"],
            "best_score": state["best_score"], "final": final}


def _spent(state: dict[str, Any]) -> float:
    """Seconds of profiling so far: an earlier launch's and this one's."""
    return state["spent0"] + time.perf_counter() - state["t0"]


def _profile_jobs(topo: Any, jobs: list[dict], steps: int | None, budget: dict[str, Any],
                  state: dict[str, Any], losses: dict[str, float], loaded: dict[str, Any]
                  ) -> list[dict]:
    """Profile ``jobs`` in turn, each unless the budget is spent (rank 0 decides, every rank
    agrees; the first candidate always profiles: a pick needs one); rank 0's outcomes (the
    others': [])."""
    from gnnscale.runner.selection import agree

    leader = topo.rank == 0
    outcomes: list[dict] = []
    for job in jobs:
        why = (over_budget(_spent(state), state["best"], budget)
               if leader and state.get("profiled") else None)
        if agree(why is not None, True):
            outcomes.append({"status": "skipped", "reason": why or ""})
            if leader:
                print(f"[auto] {job['name']}: skipped: {why}", flush=True)
            continue
        t0 = time.perf_counter()
        if job["loss0"] is None:  # collective: every rank computes its share
            job["loss0"] = initial_loss_of(job["cfg"], losses, loaded)
        initial_s = time.perf_counter() - t0
        lone = None if state.get("profiled") else (budget, state)  # the first profiled
        results = profile_one(topo, job, steps, loaded, lone)
        if results is None:  # a rank other than the leader
            state["profiled"] = True
            continue
        results["profile"]["initial_loss_s"] = initial_s
        state["profiled"] = True
        outcomes.append({"status": "ran", "results": results})
        prof = results["profile"]
        score = seconds_per_loss(prof["window_time"], prof["loss_drop_per_window"])
        if state["best_score"] is None or score < state["best_score"]:
            state["best_score"], state["best"] = score, prof["projected_run_s"]
    return outcomes


def _decide_and_train(topo: Any, payload: list[dict], steps: int | None,
                      budget: dict[str, Any], state: dict[str, Any], losses: dict[str, float],
                      loaded: dict[str, Any], outcomes: list[dict], decide: Decide
                      ) -> dict[str, Any] | None:
    """Rank 0 asks ``decide`` (given ``outcomes``) what next, every rank does it: profile more
    (and ask again), train the chosen job's run from scratch, or stop; rank 0's ``final``."""
    from torch import distributed as dist

    leader = topo.rank == 0
    while True:
        action: list[dict[str, Any] | None] = [None]
        if leader:
            now = {**budget, "spent_s": _spent(state), "best_run_s": state["best"]}
            action = [decide(outcomes, now)]
        if topo.world_size > 1:
            dist.broadcast_object_list(action, src=0)
        act = action[0]
        assert act is not None
        if "profile" not in act:
            break
        outcomes = _profile_jobs(topo, act["profile"], steps, budget, state, losses, loaded)
    results = None
    if "train" in act:
        loaded.clear()
        gc.collect()
        job = payload[act["train"]]
        results = train_chosen(topo, job)
    return {"decider": decide, "action": act, "results": results} if leader else None


def train_chosen(topo: Any, job: dict) -> dict | None:
    """The chosen job's own run on this rank, from scratch (fresh parameters, its epochs,
    evaluation and checkpoints: :func:`gnnscale.runner.worker.rank_main` with the plan the
    launcher checked), on the cores its own run would use; rank 0's results."""
    from gnnscale.runner.worker import rank_main

    plan = job["plan"]
    with _own_binding(plan.strategy.binds_cores):
        return rank_main(topo, plan.config_dict(), str(plan.config.run_dir), plan)


@contextmanager
def _own_binding(binds: bool) -> Iterator[None]:
    """A strategy whose runs are left unbound (``binds_cores = False``) profiles on the
    launcher's cores, as its own run would; the rank's own block again afterwards."""
    if binds or not os.environ.get("GNNSCALE_HOST_CORES"):
        yield
        return
    from gnnscale.distributed.threads import unbind

    before = os.sched_getaffinity(0)
    unbind()
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def initial_loss_of(cfg_dict: dict, losses: dict[str, float], loaded: dict[str, Any]) -> float:
    """The initial loss of the model ``cfg_dict`` settles
    (:func:`~gnnscale.strategies.auto.strategy.initial_loss`: collective, every rank computes
    its share of the rows), once per distinct model (``losses``, by model config) and dataset
    load (``loaded``: the task and graph)."""
    from gnnscale.strategies.auto.strategy import initial_loss
    from gnnscale.strategies.base import build_task

    key = json.dumps(cfg_dict["model"], sort_keys=True, default=str)
    if key not in losses:
        cfg = OmegaConf.create(cfg_dict)
        data = json.dumps([cfg_dict.get(k) for k in ("dataset", "task", "data_root", "seed")],
                          sort_keys=True, default=str)
        if loaded.get("key") != data:
            loaded.update(key=data, task_graph=build_task(cfg))
        task, graph = loaded["task_graph"]
        losses[key] = initial_loss(cfg, task, graph)
    return losses[key]


def profile_one(topo: Any, job: dict, steps: int | None,
                loaded: dict[str, Any] | None = None,
                lone: tuple[dict[str, Any], dict[str, Any]] | None = None) -> dict | None:
    """Build, set up and train one job's config on this rank; rank 0 writes and returns its
    results (the runner's, plus ``profile``: its initial loss (``job["loss0"]``), the task
    (``loaded``'s) and its loss, steps per profiled epoch and per full epoch, set-up seconds,
    the median timed epoch, the loss drop per epoch and the projected run), the others
    None. ``lone``: the budget and the launch's state when this is the first candidate
    profiled: its profile then ends at the end of an epoch once the budget is spent and its
    loss shows a decrease (after one epoch of a sampling candidate at the soonest, two of a
    full-graph one, whose first reports the initial parameters' loss), since
    no other candidate will start and its later epochs would rank it against nothing
    (``profile["ended_early"]`` says why)."""
    from gnnscale.runner.metrics import declared_reductions, reduce_over_ranks
    from gnnscale.runner.selection import agree
    from gnnscale.runner.worker import _results, build_context, graph_shape
    from gnnscale.strategies.base import SamplingStrategy
    from gnnscale.tasks.config import declared_task

    cfg = OmegaConf.create(job["cfg"])
    leader = topo.rank == 0
    phases = Phases()
    t_start = time.perf_counter()
    history: list[dict] = []
    with _own_binding(declared(cfg.strategy).binds_cores):
        ctx = build_context(topo, cfg, phases)
        t0 = time.perf_counter()
        strategy = registry.build(cfg.strategy, ctx=ctx)
        strategy.setup()
        setup_s = time.perf_counter() - t0
        full = strategy.num_steps(0) or 1
        if steps is not None and isinstance(strategy, SamplingStrategy):
            strategy.schedule.max_steps = steps
        window = strategy.num_steps(0) or 1
        reductions = declared_reductions(cfg)
        least = 1 if isinstance(strategy, SamplingStrategy) else 2
        ended_early = None
        try:
            for epoch in range(cfg.epochs):
                local = strategy.train_epoch(epoch, None)
                if strategy.reports:
                    history.append({"epoch": epoch,
                                    **reduce_over_ranks(local, strategy.group, reductions)})
                if lone is not None and least <= epoch + 1 < cfg.epochs:
                    ended_early = _spent_after(history, job, full / window, lone, leader)
                    if agree(ended_early is not None, True):
                        break
        finally:
            strategy.close()
    graph = ctx.graph
    del strategy, ctx
    gc.collect()
    if not leader:
        return None
    results = _results(history, cfg, topo, declared_task(cfg))
    results["graph"] = graph_shape(graph)
    results["startup"] = {**phases.seconds, "strategy_setup": setup_s}
    times = [h["epoch_time"] for h in history]
    window_time = statistics.median(times[1:] if len(times) > 1 else times)
    drop = (job["loss0"] - history[-1]["train_loss"]) / len(history)
    task = (loaded or {}).get("task_graph", (None,))[0]
    results["profile"] = {
        "initial_loss": job["loss0"], "task": getattr(task, "name", None),
        "loss": getattr(task, "loss_name", None),
        "window_steps": window, "steps_per_epoch": full, "setup_s": setup_s,
        "seconds": time.perf_counter() - t_start, "window_time": window_time,
        "loss_drop_per_window": drop,
        "projected_run_s": job["run_epochs"] * window_time * full / window,
        "ended_early": ended_early}
    write_text_atomic(Path(cfg.run_dir) / "results.json", json.dumps(results, indent=1))
    early = (f"; its profile ended early: {ended_early}, so no other candidate starts"
             if ended_early else "")
    print(f"[auto] {job['name']}: profiled {len(history)} epoch(s) of {window} step(s) "
          f"(of {full}) in {results['profile']['seconds']:.1f} s (set-up {setup_s:.1f} s), "
          f"{window_time:.3g} s per profiled epoch{early}", flush=True)
    return results


def _spent_after(history: list[dict], job: dict, per_window: float,
                 lone: tuple[dict[str, Any], dict[str, Any]], leader: bool) -> str | None:
    """On rank 0: why the first candidate's profile ends after the epochs of ``history``
    (its loss below the initial one, and the budget spent against the run it projects from
    them; None: it goes on)."""
    if not leader or history[-1]["train_loss"] >= job["loss0"]:  # no decrease shows yet
        return None
    budget, state = lone
    times = [h["epoch_time"] for h in history]
    projected = job["run_epochs"] * statistics.median(times[1:] or times) * per_window
    return over_budget(_spent(state), projected, budget)
