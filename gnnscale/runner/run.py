"""Entry point behind ``train.py``: validate, prepare the data once, launch ranks, report."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from gnnscale import registry
from gnnscale.runner.validate import check_config, check_data
from gnnscale.runner.worker import rank_main


def run(cfg: DictConfig) -> dict:
    """Train as ``cfg`` says; returns rank 0's results (summary, per-epoch history, config)."""
    registry.load_all()
    from gnnscale.runner.auto import is_auto, run_auto

    if is_auto(cfg):  # profile the candidates, then train the chosen one through run()
        return run_auto(cfg)
    check_config(cfg)
    cfg_dict = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    run_dir = Path(cfg_dict["run_dir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    # Process the dataset once, here, so that ranks only memory-map it; check what needs it.
    graph = registry.build(OmegaConf.create(cfg_dict["dataset"])).load()
    check_data(cfg, graph)
    del graph
    launcher = registry.build(cfg.dist)
    results = launcher.launch(rank_main, cfg_dict, str(run_dir))
    return results[0]
