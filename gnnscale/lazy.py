"""Exports a package loads on first use, so that importing the package (for its torch-free
``schemas``) imports nothing heavy."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package`` that imports ``exports[name]`` (a module path)
    the first time ``name`` is asked for."""

    def __getattr__(name: str) -> object:
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
