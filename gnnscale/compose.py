"""The one compose of the package's Hydra config (torch-free): every place that composes a
config (:func:`gnnscale.compose` in the Python API, ``python -m gnnscale.partition``, a sweep's
jobs checked before any trains, ``strategy=auto``'s candidates) calls :func:`compose`, over the
one config path :data:`gnnscale.paths.CONFIGS`.

Inside a Hydra session (:func:`session`: one opened here, or the running ``train.py`` app's)
a compose reuses it, with its search path; outside one it opens its own for that compose.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from omegaconf import DictConfig

from gnnscale.paths import CONFIGS

#: the root config's name in :data:`~gnnscale.paths.CONFIGS`
ROOT = "config"


@contextmanager
def session(job_name: str = "gnnscale", own: bool = False) -> Iterator[Any]:
    """Hydra's global state over :data:`~gnnscale.paths.CONFIGS` for the block (its
    ``GlobalHydra``): the running one when Hydra is initialised already (the ``train.py`` app,
    an enclosing session), else one opened here for the job ``job_name`` and closed after.
    ``own``: always open one here (Hydra refuses it, as before, inside another app)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if not own and GlobalHydra.instance().is_initialized():
        yield GlobalHydra.instance()
        return
    with initialize_config_dir(str(CONFIGS), version_base=None, job_name=job_name):
        yield GlobalHydra.instance()


def running_searchpath() -> list[str]:
    """The running Hydra app's ``hydra.searchpath`` (a user's own config folders) as an
    override, so a compose inside it sees the same options; none outside an app."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return []
    path = list(HydraConfig.get().searchpath)
    return [f"hydra.searchpath=[{','.join(path)}]"] if path else []


def compose(overrides: Sequence[str] = (), return_hydra_config: bool = False,
            job_name: str = "gnnscale", own: bool = False) -> DictConfig:
    """The root config for ``overrides``, as ``train.py`` composes it: every option's typed
    schema registered first (:func:`gnnscale.registry.load_all`), then Hydra's compose in a
    :func:`session` (the enclosing one, else its own named ``job_name``; ``own``: always its
    own). Hydra's errors pass through (each caller words its own)."""
    from hydra import compose as hydra_compose

    from gnnscale import registry

    registry.load_all()
    with session(job_name, own):
        return hydra_compose(ROOT, overrides=[str(o) for o in overrides],
                             return_hydra_config=return_hydra_config)


def group_options(group: str, overrides: Sequence[str] = ()) -> list[str]:
    """Every option of config ``group`` (the package's and a search path's, ``overrides``:
    e.g. :func:`running_searchpath`), in name order."""
    from gnnscale import registry

    registry.load_all()
    with session() as gh:
        return sorted(gh.config_loader().get_group_options(
            group, config_name=ROOT, overrides=list(overrides)))
