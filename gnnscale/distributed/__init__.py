"""Process groups, topology and launching ranks (gloo on CPU, nccl on CUDA; ``schemas``: the
``dist`` option's typed config, torch-free)."""

import importlib

from gnnscale.distributed.schemas import Backend, Device

_EXPORTS = {"RankFailed": "gnnscale.distributed.launch", "Topology": "gnnscale.distributed.launch",
            "free_port": "gnnscale.distributed.launch", "spawn": "gnnscale.distributed.launch",
            "resolve_backend": "gnnscale.distributed.topology"}
__all__ = ["Backend", "Device", "RankFailed", "Topology", "free_port", "resolve_backend", "spawn"]


def __getattr__(name: str):
    """The exports on first use (they import torch; the schemas do not)."""
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
