"""Hydra config groups are the registry.

Every option module ``gnnscale/<package>/<option>.py`` declares a typed dataclass schema with a
``_target_`` and registers it with :func:`register` under ``schema/<group>/<option>``; the YAML
``configs/<group>/<option>.yaml`` extends that schema
(``defaults: [/schema/<group>/<option>@_here_]``), so a misspelt key fails at composition.
:func:`load_all` imports every option module so that their schemas are in the ConfigStore
before Hydra composes. :func:`build` instantiates one component from its own sub-config plus
runtime objects.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.utils import get_object
from omegaconf import OmegaConf

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


def register(group: str, name: str):
    """Class decorator: store a dataclass schema as ``schema/<group>/<name>``."""
    if group not in GROUPS and group != "root":
        raise ValueError(f"unknown config group {group!r}; known: {sorted(GROUPS)}")

    def deco(cls):
        ConfigStore.instance().store(group=f"schema/{group}", name=name, node=cls)
        return cls

    return deco


def load_all() -> None:
    """Import every module of every component package, registering their schemas."""
    global _loaded
    if _loaded:
        return
    importlib.import_module("gnnscale.schema")  # the top-level config
    for package in GROUPS.values():
        pkg = importlib.import_module(package)
        for info in pkgutil.iter_modules(pkg.__path__):
            if not info.name.startswith("_"):
                importlib.import_module(f"{package}.{info.name}")
    _loaded = True


def option(group: str, name: str, **overrides: Any) -> Any:
    """The typed default config of option ``name`` of ``group`` (its schema), with
    ``overrides``: what ``group=name group.key=value`` composes, without Hydra's search path."""
    load_all()
    try:
        node = ConfigStore.instance().load(f"schema/{group}/{name}.yaml").node
    except Exception as err:  # noqa: BLE001 - Hydra raises several kinds
        raise ValueError(f"no option {name!r} in config group {group!r}") from err
    return OmegaConf.merge(node, overrides)


def build(cfg: Any, **runtime: Any) -> Any:
    """Instantiate the component ``cfg._target_`` from its own sub-config plus runtime objects.

    Config values arrive as plain Python values (lists, dicts; closed choices typed as enums
    in a schema arrive as their names); runtime objects are passed
    through untouched (Hydra's ``instantiate`` would convert dataclasses into configs).
    """
    kwargs = (OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
              if not isinstance(cfg, dict) else dict(cfg))
    target = kwargs.pop("_target_", None)
    if not target:
        raise ValueError(f"config node has no _target_: {kwargs}")
    return get_object(target)(**kwargs, **runtime)
