"""Chooses the implementation of ``torch.ops.gnnscale.*``: the native extension ``gnnscale._C``
or the torch-only path (:mod:`gnnscale.ops._torch`).

``GNNSCALE_NATIVE`` picks: ``auto`` (the default) loads the extension and falls back to the
torch-only path when it is absent or fails to load (an extension built against another torch),
saying so in one line, once (in rank 0 of a run); ``1`` requires the extension (an ImportError
that says how to build it); ``0`` always takes the torch-only path.

The pattern every op module of :mod:`gnnscale.ops` follows: the module's typed wrappers call
``native().<op>(...)`` with the schema's arguments, and :mod:`gnnscale.ops._torch` holds a
function of the same name and arguments (every op has one; a large one may live in its own
module, as the split does in :mod:`gnnscale.ops._torch_split`, re-exported there; the disk
reader's fallback is :mod:`gnnscale.ops.io`'s own thread pool). Nothing outside
:mod:`gnnscale.ops` calls ``torch.ops.gnnscale``.
"""

from __future__ import annotations

import os
import sys
import types
from functools import lru_cache

import torch

ENV = "GNNSCALE_NATIVE"
_WARNED_ENV = "GNNSCALE_NATIVE_WARNED"  # set once the line is printed: child ranks stay quiet
BUILD_HINT = "python -m gnnscale.native build"


def mode() -> str:
    """``GNNSCALE_NATIVE``: "auto", "1" or "0" (anything else raises ValueError in one line)."""
    value = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if value not in ("auto", "1", "0"):
        raise ValueError(f"{ENV} must be 0 (torch-only ops), 1 (native extension required) or "
                         f"auto, got {value!r}")
    return value


@lru_cache(maxsize=1)
def _load() -> str | None:
    """Loads the extension; None when it loaded, else why not (one line)."""
    if mode() == "0":
        return f"{ENV}=0"
    try:
        from gnnscale import _C  # noqa: F401  (registers the ops on import)
    except (ImportError, OSError) as err:  # absent, or built against another torch
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if _absent():
            return "the native extension is not built"
        return f"the native extension does not load ({first[:160]})"
    return None


def _absent() -> bool:
    """Whether no file of ``gnnscale._C`` exists (as opposed to one that fails to load)."""
    import importlib.util

    try:
        return importlib.util.find_spec("gnnscale._C") is None
    except (ImportError, ValueError):  # sys.modules holds None for it: treated as absent
        return True


def _quiet_rank() -> bool:
    """Whether this process is a rank other than 0 (rank 0 says it for the run)."""
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_rank() != 0


def _why_not() -> str | None:
    why = _load()
    if why is not None and mode() == "1":
        raise ImportError(f"gnnscale: {why}, and {ENV}=1 requires it: build it against this "
                          f"torch ({torch.__version__}) with `{BUILD_HINT}` (or `make native` "
                          "in a clone)")
    return why


@lru_cache(maxsize=1)
def _fallback() -> types.ModuleType:
    from gnnscale.ops import _torch

    why = _why_not()
    if os.environ.get(_WARNED_ENV) != "1" and why != f"{ENV}=0" and not _quiet_rank():
        print(f"gnnscale: {why}; using the torch-only ops (slower, the same results; "
              f"docs/benchmarks.md). To build it: {BUILD_HINT}", file=sys.stderr, flush=True)
        os.environ[_WARNED_ENV] = "1"
    return _torch


def native():
    """The op namespace: ``torch.ops.gnnscale`` when the extension is loaded, else the
    torch-only functions of :mod:`gnnscale.ops._torch` (same names and arguments)."""
    if _why_not() is None:
        return torch.ops.gnnscale
    return _fallback()


def available() -> bool:
    """Whether the native extension is loaded (``GNNSCALE_NATIVE`` allowing it)."""
    return _load() is None
