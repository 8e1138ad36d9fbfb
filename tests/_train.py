"""Compose the real Hydra config (as train.py does) for tests, with a tmp run folder."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, open_dict

from gnnscale import registry

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def make_cfg(tmp_path: Path, *overrides: str, run: str = "run") -> DictConfig:
    """The config ``train.py`` would compose for ``overrides``, writing under ``tmp_path``."""
    registry.load_all()
    with initialize_config_dir(str(CONFIGS), version_base=None):
        cfg = compose("config", overrides=list(overrides))
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / run)
        cfg.data_root = str(tmp_path / "data")
        cfg.progress = False
    return cfg


TINY = ("dataset=synthetic", "dataset.preset=tiny", "model.hidden=32", "model.num_layers=2",
        "sampler.fanouts=[5,5]", "strategy.batch_size=128", "eval_batch_size=512", "logger=none")
