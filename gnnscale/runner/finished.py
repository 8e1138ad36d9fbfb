"""A finished run read from its folder: the one loader behind ``python -m gnnscale.predict``,
``python -m gnnscale.embed`` and :func:`gnnscale.load_run` (:meth:`FinishedRun.from_run`).

A run folder is data, never code. Every config read from a file (the checkpoint's ``config``,
``results.json``'s ``config``) is rebuilt through the typed schemas before anything uses it
(:func:`checked_config`):

* each config group's ``_target_`` must be one that the registry itself declares for that group
  (:func:`gnnscale.registry.declared`: an option of ``gnnscale/<group>/schemas.py`` or a
  strategy's or task's ``config.py``), given as plain text (no interpolation), and the node's
  keys and values must fit that option's schema;
* ``model=custom``'s ``model.target`` (the user's own ``nn.Module`` class) is imported only when
  its top-level module is found on this process's own path (``PYTHONPATH``, the installed
  packages), and never from inside the run folder.

Anything else is a one-line :class:`RunFolderError` naming the file and the key, raised before
a component is imported or built; nothing the file names runs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from gnnscale.errors import UserError

#: the checkpoint's file name in a run folder (as :data:`gnnscale.runner.checkpoint.FILENAME`)
CHECKPOINT = "checkpoint.pt"
RESULTS = "results.json"
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


class RunFolderError(UserError, ValueError):
    """A run folder whose config names what gnnscale does not declare (or does not fit its
    schema); the message names the file and the key. Nothing it names was imported."""


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _plain_text(value: Any) -> bool:
    return isinstance(value, str) and "${" not in value


def check_user_model(target: Any, where: str, run_dir: Path | None) -> None:
    """Refuse a ``model.target`` read from ``where`` unless it is a dotted name whose
    top-level module is on this process's path outside ``run_dir`` (found without importing
    it)."""
    if not isinstance(target, str) or not _DOTTED.fullmatch(target):
        raise RunFolderError(f"{where}: model.target={target!r} is not a dotted class name; the "
                             "run's config was not loaded")
    top = target.split(".", 1)[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise RunFolderError(
            f"{where}: model=custom's model.target={target} is not on this Python path: put "
            f"the package of your model class ({top}) on PYTHONPATH to load this run; a run "
            "folder never brings its own code")
    if run_dir is not None:
        places = [spec.origin] if spec.origin and spec.has_location else []
        places += list(spec.submodule_search_locations or [])
        inside = os.path.realpath(run_dir)
        for place in places:
            real = os.path.realpath(place)
            if real == inside or real.startswith(inside + os.sep):
                raise RunFolderError(
                    f"{where}: model=custom's model.target={target} would be imported from "
                    f"{place}, inside the run folder: a run folder never brings its own code; "
                    "install your model's package (or put it on PYTHONPATH) elsewhere")


def _typed_node(group: str, node: Any, where: str, run_dir: Path | None) -> DictConfig:
    """``node`` of ``group`` rebuilt on the schema the registry declares for its target."""
    from gnnscale import registry

    if not isinstance(node, dict):
        raise RunFolderError(f"{where}: {group} is a {type(node).__name__}, not a config node "
                             "with _target_; the run's config was not loaded")
    target = node.get("_target_")
    schema = registry.declared(group, target) if _plain_text(target) else None
    if schema is None:
        raise RunFolderError(
            f"{where}: {group}._target_={target!r} is not an option gnnscale declares for "
            f"{group}; a run folder's config never chooses what is imported: nothing was "
            "loaded (use a run folder that gnnscale wrote)")
    if group == "model" and "target" in node:
        if not _plain_text(node["target"]):
            raise RunFolderError(f"{where}: model.target={node['target']!r} is not plain "
                                 "text; the run's config was not loaded")
        check_user_model(node["target"], where, run_dir)
    try:
        typed = OmegaConf.merge(OmegaConf.structured(schema), node)
    except Exception as err:  # noqa: BLE001 - OmegaConf's validation errors, several kinds
        raise RunFolderError(f"{where}: {group} does not fit the schema of {target}: "
                             f"{_first_line(err)}") from None
    return cast(DictConfig, typed)  # a structured schema merged with a mapping


def checked_config(raw: Any, where: str, run_dir: str | Path | None = None) -> DictConfig:
    """The config ``raw`` (read from the file ``where``) rebuilt through the typed schemas:
    every group's ``_target_`` one the registry declares for it, each node on its option's
    schema; a :class:`RunFolderError` of one line otherwise (see the module docstring)."""
    from gnnscale import registry

    if isinstance(raw, DictConfig):
        raw = OmegaConf.to_container(raw, resolve=False)
    if not isinstance(raw, dict):
        raise RunFolderError(f"{where}: the config is a {type(raw).__name__}, not a mapping")
    run_dir = None if run_dir is None else Path(run_dir)
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if not isinstance(key, str):
            raise RunFolderError(f"{where}: config key {key!r} is not a name")
        if key in registry.GROUPS and value is not None:
            out[key] = _typed_node(key, value, where, run_dir)
        else:
            out[key] = value
    try:
        from gnnscale.schema import RootConfig

        root = OmegaConf.structured(RootConfig)
        OmegaConf.set_struct(root, False)  # a key of an older or newer gnnscale is kept
        cfg = OmegaConf.merge(root, out)  # the run's own keys typed as the root schema says
        # every value plain: an interpolation in a file is resolved here, once, and checked
        plain = cast(dict, OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    except Exception as err:  # noqa: BLE001 - OmegaConf's errors, several kinds
        raise RunFolderError(f"{where}: the config cannot be read: {_first_line(err)}") from None
    for group in registry.GROUPS:  # what a resolved interpolation made of a target
        node = plain.get(group)
        if isinstance(node, dict) and registry.declared(group, node.get("_target_")) is None:
            raise RunFolderError(f"{where}: {group}._target_ is not an option gnnscale "
                                 "declares; the run's config was not loaded")
    return cast(DictConfig, OmegaConf.create(plain))  # a mapping's config


@dataclass
class FinishedRun:
    """A finished run's folder, its checked config and its checkpoint (None without one)."""

    run_dir: Path
    config: DictConfig
    checkpoint: Path | None

    @classmethod
    def from_run(cls, run_dir: str | os.PathLike, data_root: str | None = None,
                 need_checkpoint: bool = True) -> FinishedRun:
        """The run in ``run_dir``: its checkpoint's config (else ``results.json``'s, when
        ``need_checkpoint`` is False), rebuilt through the schemas; ``results.json``'s config
        is checked too when present. ``data_root`` replaces the run's when its dataset moved.
        A missing checkpoint, or a config that names what gnnscale does not declare, is one
        :class:`UserError` line."""
        from gnnscale.runner import checkpoint

        run_dir = Path(os.path.expanduser(str(run_dir)))
        ckpt = run_dir / checkpoint.FILENAME
        results = run_dir / RESULTS
        cfg = None
        if results.is_file():
            raw = read_results(results).get("config")
            if raw is not None:
                cfg = checked_config(raw, str(results), run_dir)
        if ckpt.is_file():
            cfg = checked_config(checkpoint.load_run(ckpt)["config"], str(ckpt), run_dir)
        elif need_checkpoint or cfg is None:
            raise UserError(f"no checkpoint at {ckpt}: give run_dir= a finished run's folder "
                            "(trained with checkpoint=true, the default)")
        if data_root is not None:
            cfg.data_root = str(data_root)
        return cls(run_dir, cfg, ckpt if ckpt.is_file() else None)

    def load(self) -> tuple[Any, Any, Any]:
        """``(graph, model, task)``: :func:`load_model` on this run's checkpoint."""
        if self.checkpoint is None:
            raise UserError(f"no checkpoint in {self.run_dir}: its model cannot be loaded")
        return load_model(self.config, str(self.checkpoint), self.run_dir)


def read_results(path: Path) -> dict:
    """``results.json`` as a dict; an unreadable one is a one-line :class:`RunFolderError`."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise RunFolderError(f"{path} cannot be read: {_first_line(err)}") from None
    if not isinstance(data, dict):
        raise RunFolderError(f"{path} is not a run's results (a JSON object)")
    return data


def load_model(cfg: Any, ckpt_path: str, run_dir: str | Path | None = None
               ) -> tuple[Any, Any, Any]:
    """``(graph, model, task)`` of a run: its task's graph and its trained model (eval mode),
    built from ``cfg`` once it is checked (:func:`checked_config`: a config from a file never
    chooses what is imported) by the one builder every rank uses
    (:func:`~gnnscale.strategies.base.build_task`, :func:`~gnnscale.strategies.base.
    build_model`: the task's ``prepare`` and head), then given the checkpoint's weights."""
    from gnnscale.runner import checkpoint
    from gnnscale.strategies.base import build_model, build_task

    if run_dir is None:
        run_dir = Path(ckpt_path).parent
    cfg = checked_config(cfg, ckpt_path, run_dir)
    task, graph = build_task(cfg)
    model = build_model(cfg, graph, task, private_temp=True)
    model.load_state_dict(checkpoint.load_run(ckpt_path)["model"])
    model.eval()
    return graph, model, task


def dataset_folder(cfg: Any) -> Path | None:
    """The dataset's processed folder (where its id map and class names are), if known."""
    from gnnscale import registry

    registry.load_all()
    options = registry.options("dataset", cfg.dataset)
    return None if options is None else options.processed_dir()


def id_map(cfg: Any) -> Any:
    """The dataset's map of the user's ids (:mod:`gnnscale.data.idmap`), or None."""
    from gnnscale.data.idmap import IdMap

    folder = dataset_folder(cfg)
    return IdMap.load(folder) if folder is not None and folder.is_dir() else None
