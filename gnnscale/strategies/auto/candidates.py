"""The strategies ``auto`` may profile, read from the registry: the options of Hydra's
``strategy`` config group (``configs/strategy/*.yaml`` and any folder on ``hydra.searchpath``),
each asked through its declarations (torch-free, :func:`~gnnscale.strategies.config.declared`)
whether it is a candidate and what it prefers."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from gnnscale.compose import compose, group_options, running_searchpath
from gnnscale.errors import ConfigError
from gnnscale.paths import CONFIGS
from gnnscale.strategies.config import declared, settle_model_options


def strategy_options() -> list[str]:
    """Every option of the ``strategy`` group (the running app's search path included), in
    name order."""
    return group_options("strategy", running_searchpath())


#: composed configs by (group, option, search path, the yaml files on it): a compose costs
#: ~0.1 s of CPU, and auto asks for each candidate's strategy, deps and cache options several
#: times (~30 composes a run); a yaml edited, added or removed between two calls in one process
#: (gnnscale.train from a notebook) changes the key, so the next call composes it again
_COMPOSED: dict[tuple[str, str, tuple[str, ...], tuple[tuple[str, int, int], ...]],
                DictConfig] = {}


def _search_dirs(path: list[str]) -> list[Path]:
    """The folders a compose reads options from: the package's :data:`CONFIGS` and each
    entry of the ``hydra.searchpath=[...]`` override ``path`` (``file://``, a plain folder,
    or ``pkg://`` resolved to its package's folders)."""
    dirs = [CONFIGS]
    for override in path:
        entries = override.split("=", 1)[1].strip().strip("[]")
        for entry in (e.strip().strip("'\"") for e in entries.split(",")):
            if entry.startswith("pkg://"):
                try:
                    spec = importlib.util.find_spec(entry[len("pkg://"):].replace("/", "."))
                except (ImportError, ValueError):
                    spec = None
                if spec is not None:
                    dirs += [Path(p) for p in spec.submodule_search_locations or []]
            elif entry:
                dirs.append(Path(entry.removeprefix("file://")))
    return dirs


def yaml_identity(path: list[str]) -> tuple[tuple[str, int, int], ...]:
    """(file, mtime_ns, size) of every yaml file under the folders of the search path
    ``path`` (:func:`_search_dirs`): every file a compose over it may read (~100 stats, a
    few ms)."""
    out = []
    for folder in _search_dirs(path):
        if not folder.is_dir():
            continue
        for file in sorted(folder.rglob("*.y*ml")):
            try:
                st = file.stat()
            except OSError:  # removed while listed
                continue
            out.append((str(file), st.st_mtime_ns, st.st_size))
    return tuple(out)


def option_node(group: str, name: str) -> DictConfig:
    """What ``group=name`` composes for that group (its schema and yaml, nothing else): a
    copy of what this process composed for that option and search path, while none of the
    search path's yaml files changed since (:func:`yaml_identity`)."""
    path = running_searchpath()
    key = (group, name, tuple(path), yaml_identity(path))
    if key not in _COMPOSED:
        try:
            node = compose([*path, f"{group}={name}"])
        except Exception as err:  # noqa: BLE001 - Hydra raises several kinds
            raise ConfigError(f"no option {name!r} in config group {group!r}: {err}"
                              ) from err
        for old in [k for k in _COMPOSED if k[:3] == key[:3]]:
            del _COMPOSED[old]  # that option's composition from files since edited
        _COMPOSED[key] = node
    return copy.deepcopy(_COMPOSED[key][group])


def candidates(cfg: DictConfig) -> list[tuple[str, str | None]]:
    """(name, why not) for every registered strategy: why not is None for a candidate."""
    out = []
    for name in strategy_options():
        decl = declared(option_node("strategy", name))
        why = "a meta strategy" if decl.meta else decl.why_not_candidate(cfg)
        out.append((name, why))
    return out


def candidate_config(cfg: DictConfig, name: str, run_dir: Path,
                     epochs: int | None) -> DictConfig:
    """``cfg`` (strategy=auto) as ``strategy=<name>`` would compose it, training ``epochs``
    in ``run_dir``; deps and cache the user left unset are the candidate's preferred ones, and
    the model options left to the run (``auto``) are the candidate's own
    (:func:`settle_model`)."""
    auto = cfg.strategy
    base = cast(dict, OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    node = option_node("strategy", name)
    overrides: dict[str, Any] = {}
    if auto.batch_size is not None and "batch_size" in node:
        overrides["batch_size"] = auto.batch_size
    if auto.options.get(name):
        overrides.update(cast(dict, OmegaConf.to_container(auto.options[name])))
    try:
        node = cast(DictConfig, OmegaConf.merge(node, overrides))
    except Exception as err:  # noqa: BLE001 - OmegaConf raises several kinds
        raise ConfigError(f"strategy.options.{name}: {err}") from err
    base["strategy"] = OmegaConf.to_container(node, enum_to_str=True)
    preferred = declared(node).preferred(cfg)
    for group in ("deps", "cache"):
        if OmegaConf.is_missing(cfg, group):
            base[group] = OmegaConf.to_container(option_node(group, preferred[group]),
                                                 enum_to_str=True)
    # epochs=None: left to the candidate's own default (the root's ${gnnscale.default_epochs:})
    base.update(run_dir=str(run_dir),
                epochs="${gnnscale.default_epochs:}" if epochs is None else epochs)
    ccfg = cast(DictConfig, OmegaConf.create(base))
    settle_model(ccfg)
    return ccfg


def settle_model(ccfg: DictConfig) -> dict[str, Any]:
    """Set the model options a candidate's config leaves to the run (``auto``, e.g.
    ``model.gcn_norm``) as the launcher settles a concrete run's
    (:func:`~gnnscale.strategies.config.settle_model_options`, silently): each candidate
    builds the model its own run trains, from its first loss on. Returns
    ``{"model.<key>": value}``."""
    chosen = settle_model_options(ccfg)
    return {f"model.{k}": v for k, (v, _) in chosen.items()}
