"""Entry point behind ``train.py``: validate, prepare the data once, launch ranks, report."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from gnnscale import registry
from gnnscale.runner.validate import strategy_class, validate
from gnnscale.runner.worker import rank_main


def run(cfg: DictConfig) -> dict:
    """Train as ``cfg`` says; returns rank 0's results (summary, per-epoch history, config).

    Every check runs first (:func:`~gnnscale.runner.validate.validate`); a meta strategy
    (``auto``) then runs concrete configs through this same function."""
    registry.load_all()
    validate(cfg)
    cls = strategy_class(cfg)
    if cls.meta:
        return cls.train_meta(cfg, run)
    cfg_dict = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    run_dir = Path(cfg_dict["run_dir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    launcher = registry.build(cfg.dist)
    results = launcher.launch(rank_main, cfg_dict, str(run_dir))
    return results[0]
