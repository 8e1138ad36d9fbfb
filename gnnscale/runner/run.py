"""Entry point behind ``train.py``: validate, prepare the data once, launch ranks, report."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from gnnscale import registry
from gnnscale.runner.phases import LAUNCH_ENV, Phases
from gnnscale.runner.validate import strategy_class, validate
from gnnscale.runner.worker import rank_main


def run(cfg: DictConfig) -> dict:
    """Train as ``cfg`` says; returns rank 0's results (summary, per-epoch history, config,
    and ``startup``: seconds per phase of the launcher and of rank 0).

    Every check runs first (:func:`~gnnscale.runner.validate.validate`); a meta strategy
    (``auto``) then runs concrete configs through this same function."""
    phases = Phases()
    phases.since_start("imports_and_compose")
    registry.load_all()
    with phases.time("validate"):
        validate(cfg)
    cls = strategy_class(cfg)
    if cls.meta:
        return cls.train_meta(cfg, run)
    cfg_dict = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    run_dir = Path(cfg_dict["run_dir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    launcher = registry.build(cfg.dist)
    os.environ[LAUNCH_ENV] = repr(time.time())
    try:
        results = launcher.launch(rank_main, cfg_dict, str(run_dir))[0]
    finally:
        os.environ.pop(LAUNCH_ENV, None)
    if results is None:  # a torchrun rank other than the leader
        return results
    results["startup"] = {**phases.seconds, **results.get("startup", {})}
    (run_dir / "results.json").write_text(json.dumps(results, indent=1))
    print(f"startup and phases (launcher, rank 0): {Phases.format(results['startup'])}",
          flush=True)
    return results
