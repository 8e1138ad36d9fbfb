"""Hydra config groups are the registry.

Every option of a group has a typed dataclass schema with a ``_target_`` (the class a rank
builds), registered with :func:`register` under ``schema/<group>/<option>``; the YAML
``configs/<group>/<option>.yaml`` extends that schema
(``defaults: [/schema/<group>/<option>@_here_]``), so a misspelt key fails at composition.
The schemas live in torch-free modules, one place per folder: ``<package>/schemas.py`` for
the options of a component folder, ``<package>/<option>/config.py`` for an option that is a
subpackage (a strategy, a task). :func:`load_all` imports those modules only, so the launcher
composes and checks a config without importing torch; :func:`import_all` also imports every
implementation module (what a rank needs: the fork server preloads it). :func:`build`
instantiates one component from its own sub-config plus runtime objects.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from dataclasses import fields, is_dataclass
from typing import Any, cast

from hydra.core.config_store import ConfigStore
from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf

from gnnscale import paths as _paths

#: the project's config folder (``configs/config.yaml`` and one folder per group): the one
#: path every compose of the package starts from (gnnscale/paths.py: the clone's configs/ or
#: the copy an install ships in the package)
CONFIGS = _paths.CONFIGS

# config group -> package that holds its options
GROUPS = {
    "dataset": "gnnscale.data",
    "model": "gnnscale.models",
    "sampler": "gnnscale.sampling",
    "partitioner": "gnnscale.partition",
    "cache": "gnnscale.cache",
    "deps": "gnnscale.deps",
    "strategy": "gnnscale.strategies",
    "optim": "gnnscale.optim",
    "task": "gnnscale.tasks",
    "dist": "gnnscale.distributed",
    "logger": "gnnscale.runner.loggers",
}

_loaded = False
#: group -> option -> schema class, filled by :func:`register`
_SCHEMAS: dict[str, dict[str, type]] = {}


def register(group: str, name: str):
    """Class decorator: store a dataclass schema as ``schema/<group>/<name>``."""
    if group not in GROUPS and group != "root":
        raise ValueError(f"unknown config group {group!r}; known: {sorted(GROUPS)}")

    def deco(cls):
        ConfigStore.instance().store(group=f"schema/{group}", name=name, node=cls)
        _SCHEMAS.setdefault(group, {})[name] = cls
        return cls

    return deco


def schema_modules() -> list[str]:
    """Every module that holds schemas: each group folder's ``schemas`` and each of its
    subpackages' ``config`` (found on disk, nothing imported but the group packages)."""
    names = []
    for package in GROUPS.values():
        pkg = importlib.import_module(package)
        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name == "schemas" and not info.ispkg:
                names.append(f"{package}.schemas")
            elif info.ispkg and any(sub.name == "config" for sub in pkgutil.iter_modules(
                    [os.path.join(pkg.__path__[0], info.name)])):
                names.append(f"{package}.{info.name}.config")
    return names


def load_all() -> None:
    """Put every option's typed schema in Hydra's ConfigStore: import the root schema and the
    modules of :func:`schema_modules` (torch-free), no implementation."""
    global _loaded
    if _loaded:
        return
    importlib.import_module("gnnscale.schema")  # the top-level config
    for name in schema_modules():
        importlib.import_module(name)
    _loaded = True


def import_all() -> None:
    """Import every module of every group's folder and of its subpackages: each option's
    implementation too (torch, PyG), so that a process forked afterwards imports nothing."""
    load_all()
    for package in GROUPS.values():
        pkg = importlib.import_module(package)
        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{package}.{info.name}")
            for sub in pkgutil.iter_modules(getattr(module, "__path__", [])):
                if not sub.name.startswith("_"):
                    importlib.import_module(f"{module.__name__}.{sub.name}")


def option(group: str, name: str, **overrides: Any) -> Any:
    """The typed default config of option ``name`` of ``group`` (its schema), with
    ``overrides``: what ``group=name group.key=value`` composes, without Hydra's search path."""
    load_all()
    try:
        node = ConfigStore.instance().load(f"schema/{group}/{name}.yaml").node
    except Exception as err:  # noqa: BLE001 - Hydra raises several kinds
        raise ValueError(f"no option {name!r} in config group {group!r}") from err
    return OmegaConf.merge(node, overrides)


def schemas(group: str) -> dict[str, type]:
    """The registered schema classes of ``group``, by option name."""
    load_all()
    return dict(_SCHEMAS.get(group, {}))


def declared(group: str, target: Any) -> type | None:
    """The registered schema of ``group`` whose ``_target_`` is exactly ``target`` (None when
    no option of ``group`` declares it): what a config read from a file may name. Nothing is
    imported but the schema modules."""
    if group not in GROUPS or not isinstance(target, str) or not target:
        return None
    load_all()
    for cls in _SCHEMAS.get(group, {}).values():
        if getattr(cls, "_target_", None) == target:
            return cls
    return None


def schema_of(group: str, node: Any) -> type | None:
    """The schema class behind a composed sub-config of ``group``: its structured type, else
    the registered schema whose ``_target_`` it names (None: an option without a schema)."""
    load_all()
    cls = OmegaConf.get_type(node) if isinstance(node, DictConfig) else None
    if is_dataclass(cls):
        return cls
    target = node.get("_target_") if node is not None else None
    for cls in _SCHEMAS.get(group, {}).values():
        if target and getattr(cls, "_target_", None) == target:
            return cls
    return None


def instance(cls: type | None, node: Any) -> Any:
    """The sub-config ``node`` as an instance of the schema ``cls`` (plain values: enums as
    their names, interpolations resolved; keys ``cls`` lacks left out); None without one."""
    if cls is None or node is None or not is_dataclass(cls):
        return None
    values = cast(dict, OmegaConf.to_container(node, resolve=True, enum_to_str=True)
                  if isinstance(node, DictConfig) else dict(node))
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def options(group: str, node: Any) -> Any:
    """The sub-config ``node`` of ``group`` as an instance of its schema, for the schema's
    torch-free checks and facts; None when the option has no registered schema."""
    return instance(schema_of(group, node), node) if node is not None else None


def check_options(cfg: Any, groups: Any = None) -> None:
    """Every component's own check (:meth:`gnnscale.schema.Options.check`) on its composed
    sub-config, torch-free; ``groups``: which ones (default: every group)."""
    for group in groups or GROUPS:
        node = cfg.get(group)
        if node is None:
            continue
        opts = options(group, node)
        if opts is not None and hasattr(opts, "check"):
            opts.check()


def build(cfg: Any, **runtime: Any) -> Any:
    """Instantiate the component ``cfg._target_`` from its own sub-config plus runtime objects.

    Config values arrive as plain Python values (lists, dicts; closed choices typed as enums
    in a schema arrive as their names); runtime objects are passed
    through untouched (Hydra's ``instantiate`` would convert dataclasses into configs).
    """
    kwargs = cast(dict, OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
                  if not isinstance(cfg, dict) else dict(cfg))
    target = kwargs.pop("_target_", None)
    if not target:
        raise ValueError(f"config node has no _target_: {kwargs}")
    return get_object(target)(**kwargs, **runtime)
