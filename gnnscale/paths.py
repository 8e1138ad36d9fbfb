"""Where the package's files are, in a clone and in an install (torch-free, imports nothing).

In a clone the configs and the C++ sources sit beside the package (``configs/``, ``csrc/``); a
wheel ships them inside it (``gnnscale/configs/``, ``gnnscale/_csrc/``: setup.py maps the
top-level folders as package data). Every compose of the package starts from :data:`CONFIGS`
(:mod:`gnnscale.registry` re-exports it); ``GNNSCALE_CONFIG_DIRS`` (folders separated by
``os.pathsep``) adds the user's own config folders to Hydra's search path, ahead of the
package's, so an experiment's ``dataset/mine.yaml`` there is ``dataset=mine``.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
USER_DIRS_ENV = "GNNSCALE_CONFIG_DIRS"


def _first(*candidates: Path, marker: str) -> Path:
    """The first candidate holding ``marker`` (else the first: the clone's layout)."""
    for c in candidates:
        if (c / marker).exists():
            return c
    return candidates[0]


#: the config folder (``config.yaml`` and one folder per group)
CONFIGS = _first(PACKAGE / "configs", PACKAGE.parent / "configs", marker="config.yaml")
#: the C++ sources of the native extension (``csrc/<domain>/...``)
CSRC = _first(PACKAGE.parent / "csrc", PACKAGE / "_csrc", marker="extension.cpp")


def user_config_dirs() -> list[Path]:
    """The user's config folders from ``GNNSCALE_CONFIG_DIRS`` (each must exist: else
    ValueError in one line)."""
    out = []
    for part in os.environ.get(USER_DIRS_ENV, "").split(os.pathsep):
        if not part.strip():
            continue
        p = Path(part).expanduser().resolve()
        if not p.is_dir():
            raise ValueError(f"{USER_DIRS_ENV} names {part!r}, which is not a folder")
        out.append(p)
    return out


def searchpath_overrides() -> list[str]:
    """Hydra overrides putting the user's config folders on the search path (none without
    ``GNNSCALE_CONFIG_DIRS``)."""
    dirs = user_config_dirs()
    if not dirs:
        return []
    listed = ",".join(f"file://{d}" for d in dirs)
    return [f"hydra.searchpath=[{listed}]"]
