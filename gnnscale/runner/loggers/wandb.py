"""``logger=wandb``: the real wandb library; ``mode=offline`` (default) writes run files (and
wandb's cache, config and debug logs) under the run folder with no network, ``mode=online``
syncs for users with an account."""

from __future__ import annotations

import os
from pathlib import Path

from gnnscale.runner.loggers.base import Logger
from gnnscale.runner.loggers.schemas import WandbConfig


class WandbLogger(Logger):
    """Logs to wandb (``mode`` offline, online or disabled)."""

    def __init__(self, project: str = "gnnscale", entity: str | None = None,
                 mode: str = "offline", name: str | None = None,
                 tags: list[str] | None = None) -> None:
        WandbConfig(mode=mode).check()
        self.project, self.entity, self.mode, self.name = project, entity, mode, name
        self.tags = list(tags or [])
        self.run = None

    def start(self, config: dict, run_dir: str) -> None:
        """``wandb.init`` in ``run_dir``, wandb's cache, config and data folders under it too."""
        import wandb

        os.environ.setdefault("WANDB_SILENT", "true")
        # wandb's own cache, config, debug logs and artifacts default to the home folder:
        # keep every write inside the run folder (unless the user chose a place)
        base = Path(run_dir) / "wandb"
        for var, sub in (("WANDB_CACHE_DIR", "cache"), ("WANDB_CONFIG_DIR", "config"),
                         ("WANDB_DATA_DIR", "data"), ("WANDB_ARTIFACT_DIR", "artifacts")):
            os.environ.setdefault(var, str(base / sub))
        self.run = wandb.init(project=self.project, entity=self.entity, mode=self.mode,
                              name=self.name, tags=self.tags, config=config, dir=run_dir,
                              reinit="finish_previous")

    def log_epoch(self, epoch: int, metrics: dict) -> None:
        """``run.log`` the metrics at step ``epoch``."""
        self.run.log(metrics, step=epoch)

    def finish(self, summary: dict) -> None:
        """Copy the summary into the run's summary and finish the run."""
        for k, v in summary.items():
            self.run.summary[k] = v
        self.run.finish()
