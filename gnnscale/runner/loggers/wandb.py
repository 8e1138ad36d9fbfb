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
        self._set_env: list[str] = []  # the WANDB_* variables this run set, unset at finish

    def start(self, config: dict, run_dir: str) -> None:
        """``wandb.init`` in ``run_dir``, wandb's cache, config and data folders under it too."""
        import wandb

        # wandb's own cache, config, debug logs and artifacts default to the home folder:
        # keep every write inside the run folder (unless the user chose a place)
        # (set for this run only: a second run in the same process gets its own folders)
        base = Path(run_dir) / "wandb"
        chosen = {"WANDB_SILENT": "true", "WANDB_CACHE_DIR": str(base / "cache"),
                  "WANDB_CONFIG_DIR": str(base / "config"), "WANDB_DATA_DIR": str(base / "data"),
                  "WANDB_ARTIFACT_DIR": str(base / "artifacts")}
        for var, value in chosen.items():
            if var not in os.environ:
                os.environ[var] = value
                self._set_env.append(var)
        self.run = wandb.init(project=self.project, entity=self.entity, mode=self.mode,
                              name=self.name, tags=self.tags, config=config, dir=run_dir,
                              reinit="finish_previous")

    def log_epoch(self, epoch: int, metrics: dict) -> None:
        """``run.log`` the metrics at step ``epoch``."""
        self.run.log(metrics, step=epoch)

    def finish(self, summary: dict) -> None:
        """Copy the summary into the run's summary and finish the run; then stop wandb's
        service process when no other wandb run is active in this process (a run from Python
        leaves no process behind), and unset the folders this run chose."""
        import wandb

        for k, v in summary.items():
            self.run.summary[k] = v
        self.run.finish()
        if wandb.run is None:
            wandb.teardown()
        for var in self._set_env:
            os.environ.pop(var, None)
        self._set_env = []
