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
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gnnscale import registry
from gnnscale.data.publish import write_text_atomic
from gnnscale.errors import ConfigError
from gnnscale.runner.phases import Phases
from gnnscale.runner.prepare import prepare_data
from gnnscale.runner.validate import check_config, validate_data
from gnnscale.strategies.auto.choice import over_budget, seconds_per_loss
from gnnscale.strategies.config import declared

#: what one job is: ``name`` (the strategy), ``cfg`` (its concrete config: ``epochs`` profiled
#: epochs, ``run_dir`` its folder), ``loss0`` (its initial loss), ``run_epochs`` (epochs its
#: own run would train: the budget's projection)
Job = dict[str, Any]


def profile_configs(jobs: list[Job], steps: int | None, budget: dict[str, Any],
                    launch: Callable[[DictConfig], Any]) -> list[dict]:
    """Each job's outcome, in ``jobs``' order: ``{"status": "ran", "results": ...}`` (its
    ``results.json``), or ``refused``/``crashed``/``skipped`` with a ``reason``. ``budget``:
    ``profile_s``, ``share`` (see the module docstring), ``spent_s`` (seconds spent already,
    by an earlier launch), ``best_run_s`` and ``best_score`` (the best candidate's projected
    training and score so far, or None); it is updated with this launch's. ``launch``: the
    runner's launcher of a config's ``dist`` (:func:`~gnnscale.runner.run.launcher`)."""
    out: list[dict | None] = [None] * len(jobs)
    ready: list[int] = []
    for i, job in enumerate(jobs):
        try:
            check_config(job["cfg"])
            prepare_data(job["cfg"])
            validate_data(job["cfg"])
        except ConfigError as err:
            print(f"[auto] {job['name']}: refused: {err}", flush=True)
            out[i] = {"status": "refused", "reason": str(err)}
            continue
        Path(job["cfg"].run_dir).mkdir(parents=True, exist_ok=True)
        (Path(job["cfg"].run_dir) / "results.json").unlink(missing_ok=True)
        ready.append(i)
    while ready:
        ready = _launch_once(jobs, ready, steps, budget, out, launch)
    return [o if o is not None else {"status": "skipped", "reason": "not profiled"} for o in out]


def _launch_once(jobs: list[Job], ready: list[int], steps: int | None, budget: dict[str, Any],
                 out: list[dict | None], launch: Callable[[DictConfig], Any]) -> list[int]:
    """One launch for the jobs ``ready`` (indices); fills ``out``; the jobs still to launch
    (after one that crashed), else []."""
    from gnnscale.distributed.threads import quiet_waits

    cfgs = [jobs[i]["cfg"] for i in ready]
    binding = next((c for c in cfgs if declared(c.strategy).binds_cores), cfgs[0])
    ranks = launch(binding)
    payload = [{"name": jobs[i]["name"], "loss0": jobs[i]["loss0"],
                "run_epochs": jobs[i]["run_epochs"],
                "cfg": OmegaConf.to_container(jobs[i]["cfg"], resolve=True, enum_to_str=True)}
               for i in ready]
    quiet_waits()
    t0 = time.perf_counter()
    try:
        done = ranks.launch(profile_rank, payload, steps, dict(budget))[0]
    except Exception as err:  # noqa: BLE001 - a crashing config must not end the others
        # RankFailed from spawned ranks; one rank (world_size=1) raises the error itself
        budget["spent_s"] = budget.get("spent_s", 0.0) + time.perf_counter() - t0
        first = next((k for k, i in enumerate(ready)
                      if not (Path(jobs[i]["cfg"].run_dir) / "results.json").is_file()),
                     len(ready))
        if first == len(ready):
            raise  # every job had finished: the launch itself failed
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
    return []


def profile_rank(topo: Any, payload: list[dict], steps: int | None,
                 budget: dict[str, Any]) -> dict | None:
    """What every rank runs: each job in turn on this process group (see the module
    docstring); rank 0 returns the outcomes, the seconds spent and the best projected run."""
    from gnnscale.runner.selection import agree

    leader = topo.rank == 0
    spent0, best = float(budget.get("spent_s") or 0.0), budget.get("best_run_s")
    best_score = budget.get("best_score")
    outcomes: list[dict] = []
    losses: dict[str, float] = {}
    loaded: dict[str, Any] = {}
    t0 = time.perf_counter()
    for job in payload:
        why = over_budget(spent0 + time.perf_counter() - t0, best, budget) if leader else None
        if agree(why is not None, True):
            outcomes.append({"status": "skipped", "reason": why or ""})
            if leader:
                print(f"[auto] {job['name']}: skipped: {why}", flush=True)
            continue
        if job["loss0"] is None:  # collective: every rank computes its share
            job["loss0"] = initial_loss_of(job["cfg"], losses, loaded)
        results = profile_one(topo, job, steps, loaded)
        if results is None:  # a rank other than the leader
            continue
        outcomes.append({"status": "ran", "results": results})
        prof = results["profile"]
        score = seconds_per_loss(prof["window_time"], prof["loss_drop_per_window"])
        if best_score is None or score < best_score:
            best_score, best = score, prof["projected_run_s"]
    if not leader:
        return None
    return {"jobs": outcomes, "spent_s": spent0 + time.perf_counter() - t0, "best_run_s": best,
            "best_score": best_score}


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
                loaded: dict[str, Any] | None = None) -> dict | None:
    """Build, set up and train one job's config on this rank; rank 0 writes and returns its
    results (the runner's, plus ``profile``: its initial loss (``job["loss0"]``), the task
    (``loaded``'s) and its loss, steps per profiled epoch and per full epoch, set-up seconds,
    the median timed epoch, the loss drop per epoch and the projected run), the others
    None."""
    from gnnscale.runner.metrics import declared_reductions, reduce_over_ranks
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
        try:
            for epoch in range(cfg.epochs):
                local = strategy.train_epoch(epoch, None)
                if strategy.reports:
                    history.append({"epoch": epoch,
                                    **reduce_over_ranks(local, strategy.group, reductions)})
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
        "projected_run_s": job["run_epochs"] * window_time * full / window}
    write_text_atomic(Path(cfg.run_dir) / "results.json", json.dumps(results, indent=1))
    print(f"[auto] {job['name']}: profiled {len(history)} epoch(s) of {window} step(s) "
          f"(of {full}) in {results['profile']['seconds']:.1f} s (set-up {setup_s:.1f} s), "
          f"{window_time:.3g} s per profiled epoch", flush=True)
    return results
