"""Preparing a run's data, the launcher's own step between the checks the config alone decides
(:func:`gnnscale.runner.validate.check_config`) and those that read the data
(:func:`gnnscale.runner.validate.validate_data`), which only read what is there.

A single-host launch given ``parts=DIR`` with no layout there gets it written first
(:func:`write_missing_layout`). Processing a dataset that has not been, and a task's derived
data (link prediction's edge split), are still done by the data checks that read them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from gnnscale.distributed.schemas import under_torchrun
from gnnscale.partition.layout import LAYOUT_FILE

if TYPE_CHECKING:
    from gnnscale.runner.plan import RunPlan


def prepare_data(plan: RunPlan | DictConfig) -> None:
    """Write what the run reads and nothing has written yet: on a single-host launch, the
    layout ``parts=`` names when the run can train from one
    (:func:`~gnnscale.runner.validate.parts_problem` says none; else the data checks refuse
    it, and nothing is written). ``plan``: the run's checked plan (a config is planned
    first)."""
    from gnnscale.runner.plan import RunPlan
    from gnnscale.runner.validate import parts_problem

    if not isinstance(plan, RunPlan):
        plan = RunPlan.of(plan)
    if plan.parts and not under_torchrun() and parts_problem(plan.config, plan.checked) is None:
        write_missing_layout(plan.config)


def write_missing_layout(cfg: DictConfig) -> bool:
    """On a single-host launch, write the layout ``cfg.parts`` names when there is none yet
    (a missing or empty folder): the run's dataset cut by its partitioner into one part per
    rank, as ``python -m gnnscale.partition`` with the run's overrides writes it. True when
    written. Under torchrun every host must be given its folders (each host's processes
    would write their own copies), so a missing layout is refused there by the checks."""
    root = Path(os.path.expanduser(str(cfg.parts)))
    if (root / LAYOUT_FILE).is_file() or (root.is_dir() and any(root.iterdir())):
        return False
    from gnnscale.partition.cli import run as partition

    world = int(cfg.dist.world_size)
    print(f"parts={root} holds no layout yet: partitioning the dataset into {world} parts "
          "there first (python -m gnnscale.partition with this run's overrides)", flush=True)
    partition(cfg, log=lambda _m: None, parts=world)
    return True
