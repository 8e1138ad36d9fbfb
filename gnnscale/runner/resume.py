"""Honest resume: the checkpoint's config against the new one, checked before ranks start.

Changes that would make the resumed run differ from an uninterrupted one (world size, model,
strategy, data, sampler, optimizer, seed...) are refused with the keys named; changes that do
not touch training (epochs, evaluation, the reported epoch and early stopping, logging,
paths, timeouts) are applied and reported. The checkpoint is checked field by field
(:func:`gnnscale.runner.checkpoint.check_state`) and the graph it was trained on (its
checksum) against the graph the new run would train on (:func:`check_graph`): a dataset file
rewritten in place is a new graph, not a run to continue.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gnnscale.compare.runs import flatten
from gnnscale.distributed.schemas import under_torchrun
from gnnscale.errors import ConfigError
from gnnscale.runner import checkpoint

SAFE_KEYS = ("epochs", "eval_every", "eval_batch_size", "progress", "checkpoint", "resume",
             "run_dir", "data_root", "experiment", "logger", "dist.timeout_s",
             "dist.startup_timeout_s",
             "dist.threads_per_rank", "dist.bind_cores", "dataset.root", "footprint", "metric",
             "select", "early_stop")


class ResumeError(ValueError):
    """``resume=true`` with a config the checkpoint cannot continue exactly."""


def _safe(key: str) -> bool:
    return any(key == s or key.startswith(s + ".") for s in SAFE_KEYS)


def config_changes(old: dict, new: dict) -> dict[str, tuple[Any, Any]]:
    """``key -> (old, new)`` for every leaf that differs (missing = ``<absent>``)."""
    a, b = flatten(old), flatten(new)
    absent = "<absent>"
    return {k: (a.get(k, absent), b.get(k, absent)) for k in sorted(set(a) | set(b))
            if a.get(k, absent) != b.get(k, absent)}


def _show(changes: dict[str, tuple[Any, Any]]) -> str:
    return ", ".join(f"{k}: {o!r} -> {n!r}" for k, (o, n) in changes.items())


def check_resume(cfg: DictConfig, log: Callable[[str], None] = print) -> dict | None:
    """With ``resume=true``: the checkpoint's state when it can continue this config exactly
    (reporting the safe changes), None when there is nothing to resume (said so); raises
    :class:`ResumeError` naming the keys that changed otherwise."""
    if not cfg.resume:
        return None
    path = Path(cfg.run_dir) / checkpoint.FILENAME
    if not path.exists():
        if os.environ.get("RANK", "0") != "0" and under_torchrun():  # rank 0's decides
            log(f"resume=true: no checkpoint at {path} on this host; this rank resumes from "
                "rank 0's, if it has one")
        else:
            log(f"resume=true but there is no checkpoint at {path}: training from epoch 0")
        return None
    state = checkpoint.load_run(path)
    old = state.get("config")
    if not isinstance(old, dict):
        raise ResumeError(f"{path} records no config, so an exact resume cannot be checked: "
                          "start a new run (resume=false or another run_dir)")
    new = checkpoint.plain(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    changes = config_changes(old, new)
    unsafe = {k: v for k, v in changes.items() if not _safe(k)}
    if unsafe:
        raise ResumeError(
            f"resume=true: {path} was written with another config, and these changes would "
            f"make the resumed run differ from an uninterrupted one: {_show(unsafe)}. Set them "
            "back, or start a new run (resume=false, or another run_dir)"
        )
    if state["epoch"] + 1 >= cfg.epochs:
        log(f"resume: {path} already holds epoch {state['epoch']}; epochs={cfg.epochs} leaves "
            "nothing to train")
    shown = {k: v for k, v in changes.items() if not k.startswith(("resume", "run_dir"))}
    if shown:
        log(f"resume: applying changed settings: {_show(shown)}")
    return state


def check_graph(cfg: DictConfig, graph: Any) -> None:
    """With ``resume=true`` and a checkpoint that records its graph's checksum: refuse when
    ``graph`` (the graph the run would train on: a loaded graph or its
    :class:`~gnnscale.data.metadata.DatasetMeta`) has another one."""
    path = Path(cfg.run_dir) / checkpoint.FILENAME
    if not cfg.get("resume") or not path.exists():
        return
    recorded = checkpoint.load_run(path).get("graph")
    meta = getattr(graph, "meta", None)
    now = meta.get("checksum") if isinstance(meta, dict) else getattr(graph, "checksum", None)
    if recorded is None or now is None or recorded == now:
        return
    raise ConfigError(
        f"resume=true: {path} field graph: the checkpoint was trained on the graph with "
        f"checksum {recorded}, but dataset {getattr(graph, 'name', '?')} now has checksum "
        f"{now} (its file or processed data changed): its weights do not belong to this "
        "graph; start a new run (resume=false, or another run_dir)"
    )
