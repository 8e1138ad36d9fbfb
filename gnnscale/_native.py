"""Loads the native extension that registers ``torch.ops.gnnscale.*``."""

from __future__ import annotations

import torch

_LOADED = False


def ops():
    """Return ``torch.ops.gnnscale`` after making sure the extension is loaded."""
    global _LOADED
    if not _LOADED:
        try:
            from gnnscale import _C  # noqa: F401  (registers the ops on import)
        except ImportError as err:  # pragma: no cover - depends on the build
            raise ImportError(
                "gnnscale's native extension is not built. Run `make install` (or "
                "`python setup.py build_ext --inplace`) in the repository root."
            ) from err
        _LOADED = True
    return torch.ops.gnnscale
