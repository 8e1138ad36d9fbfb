"""Entry point behind ``train.py``: validate, prepare the data once, launch ranks, report.

The launcher imports torch only once the config has passed every check it can decide alone
(:func:`~gnnscale.runner.validate.validate`), and PyG only when it trains a rank itself
(``dist.world_size=1``): several ranks import it in the fork server, once.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from gnnscale import registry
from gnnscale.data.publish import write_text_atomic
from gnnscale.distributed.schemas import under_torchrun
from gnnscale.distributed.threads import quiet_waits
from gnnscale.errors import ConfigError
from gnnscale.runner.loggers.console import RunLog, is_verbose, run_log
from gnnscale.runner.phases import LAUNCH_ENV, Phases
from gnnscale.runner.plan import RunPlan
from gnnscale.runner.prepare import prepare_data
from gnnscale.runner.profile import profile_configs
from gnnscale.runner.runlock import run_folder_lock
from gnnscale.runner.validate import strategy_class, validate
from gnnscale.strategies.config import StrategyConfig, declared, epochs_left


def rank_main(topo: Any, cfg_dict: dict, run_dir: str, plan: RunPlan | None = None
              ) -> dict | None:
    """What every rank runs (:func:`gnnscale.runner.worker.rank_main`), imported in the rank:
    the launcher hands ranks this function without importing the worker (torch, PyG) itself,
    with the run's plan."""
    from gnnscale.runner.worker import rank_main as worker_main

    return worker_main(topo, cfg_dict, run_dir, plan)


def launcher(plan: RunPlan | DictConfig) -> Any:
    """The ``dist`` option's launcher of a run's ``plan`` (or of a checked config: its
    strategy's declarations read here); what this host lacks for the backend or device (no
    CUDA, say) is a :class:`ConfigError` naming the key."""
    decl = plan.strategy if isinstance(plan, RunPlan) else declared(plan.strategy)
    dist = (plan.config if isinstance(plan, RunPlan) else plan).dist
    if dist.get("bind_cores") and not decl.binds_cores:
        dist = OmegaConf.merge(dist, {"bind_cores": False})  # its ranks run faster unbound
    try:
        return registry.build(dist)
    except ValueError as err:
        raise ConfigError(str(err)) from err


def run(cfg: DictConfig) -> dict:
    """Train as ``cfg`` says; returns rank 0's results (summary, per-epoch history, config,
    and ``startup``: seconds per phase of the launcher and of rank 0).

    Every check runs first, once (:func:`~gnnscale.runner.validate.validate`'s two halves,
    with the launcher's own data step between them: :func:`~gnnscale.runner.prepare.
    prepare_data` writes a missing part layout before the data checks read it), and gives the
    run's :class:`~gnnscale.runner.plan.RunPlan`, which the ranks are handed; then the run folder
    is locked for the run (:mod:`~gnnscale.runner.runlock`: a second run given it is refused,
    naming the holder; torchrun's rank 0 holds it for its ranks); a meta strategy (``auto``)
    then runs concrete configs through this same function, and profiles several in one
    launch through :func:`~gnnscale.runner.profile.profile_configs`."""
    phases = Phases()
    phases.since_start("imports_and_compose")
    registry.load_all()
    torchrun_world(cfg)
    with phases.time("validate"):  # the run's plan, once; a missing part layout written
        plan = validate(cfg, prepare=prepare_data)  # before the data checks read it
    run_dir = Path(str(cfg.run_dir))
    run_dir.mkdir(parents=True, exist_ok=True)
    leader = not under_torchrun() or os.environ.get("RANK") == "0"
    with run_folder_lock(run_dir) if leader else nullcontext():  # one run per folder
        with run_log(run_dir, is_verbose(cfg)) if leader else nullcontext() as log:
            note = epochs_note(cfg, plan.strategy)
            if note is not None and log is not None:
                log.detail(note)
            if plan.strategy.meta:
                return strategy_class(cfg).train_meta(
                    cfg, run, partial(profile_configs, launch=launcher))
            return _launch(plan, run_dir, phases, log)


def epochs_note(cfg: DictConfig, decl: type[StrategyConfig]) -> str | None:
    """The run's first line when its ``epochs`` is its strategy's default: how many and why
    (``cfg``: the config as composed, ``epochs`` left to the strategy or not; ``decl``: the
    plan's strategy declaration)."""
    if not epochs_left(cfg):
        return None
    if decl.meta:
        return ("epochs: each candidate profiles strategy.profile_epochs, then the chosen "
                "strategy trains its own default number of epochs (epochs=N sets it)")
    why = ("each epoch is one optimizer step over the whole graph" if not decl.samples else
           "each epoch is one pass over the training items in mini-batches")
    return f"epochs={cfg.epochs}: strategy={decl.name}'s default ({why}; epochs=N sets it)"


def torchrun_world(cfg: DictConfig) -> None:
    """Under torchrun the world is torchrun's (``WORLD_SIZE``), whatever ``dist.world_size``
    says: set it there, so that every check (a strategy's rank counts), the ranks' config, the
    checkpoint and ``results.json`` see the world that trains."""
    if under_torchrun() and "world_size" in cfg.dist:
        with open_dict(cfg):
            cfg.dist.world_size = int(os.environ["WORLD_SIZE"])


def _launch(plan: RunPlan, run_dir: Path, phases: Phases, log: RunLog | None = None) -> dict:
    """Start the ranks on the validated ``plan`` (each given the plan and its settled config),
    write ``results.json`` (with ``settled``: the model options the strategy chose, which a
    comparison of strategies lets differ); the start-up line goes to ``log`` (``train.log``,
    the terminal when verbose)."""
    cfg_dict = plan.config_dict()
    ranks = launcher(plan)
    if ranks.world_size == 1 and not under_torchrun():  # the launcher trains it: its imports
        with phases.time("rank_imports"):
            import gnnscale.runner.worker  # noqa: F401
    os.environ[LAUNCH_ENV] = repr(time.time())
    quiet_waits()  # ranks started from here on (spawned, or a fork server not yet running)
    try:
        results = ranks.launch(rank_main, cfg_dict, str(run_dir), plan)[0]
    finally:
        os.environ.pop(LAUNCH_ENV, None)
    if results is None:  # a torchrun rank other than the leader
        return results
    results["startup"] = {**phases.seconds, **results.get("startup", {})}
    results["settled"] = dict(plan.settled)
    write_text_atomic(run_dir / "results.json", json.dumps(results, indent=1))
    line = f"startup and phases (launcher, rank 0): {Phases.format(results['startup'])}"
    if log is not None:
        log.detail(line)
    return results
