"""Loads the native extension ``gnnscale._C``, which registers ``torch.ops.gnnscale.*``.

Only the modules of :mod:`gnnscale.ops` call :func:`native`; everything else calls their typed
wrappers.
"""

from __future__ import annotations

from functools import lru_cache

import torch


@lru_cache(maxsize=1)
def _load() -> None:
    try:
        from gnnscale import _C  # noqa: F401  (registers the ops on import)
    except ImportError as err:  # pragma: no cover - depends on the build
        raise ImportError(
            "gnnscale's native extension is not built. Run `make install` (or "
            "`python setup.py build_ext --inplace`) in the repository root."
        ) from err


def native():
    """``torch.ops.gnnscale``, after making sure the extension is loaded (else ImportError)."""
    _load()
    return torch.ops.gnnscale


def available() -> bool:
    """Whether the native extension is built and loads."""
    try:
        _load()
    except ImportError:
        return False
    return True
