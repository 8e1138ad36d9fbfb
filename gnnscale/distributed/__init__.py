"""Process groups, topology and launching ranks (gloo on CPU, nccl on CUDA; ``schemas``: the
``dist`` option's typed config, torch-free)."""

from gnnscale.distributed.schemas import Backend, Device
from gnnscale.lazy import lazy_exports

_EXPORTS = {"RankFailed": "gnnscale.distributed.launch", "Topology": "gnnscale.distributed.launch",
            "free_port": "gnnscale.distributed.launch", "spawn": "gnnscale.distributed.launch",
            "resolve_backend": "gnnscale.distributed.topology"}
__all__ = ["Backend", "Device", "RankFailed", "Topology", "free_port", "resolve_backend", "spawn"]

__getattr__ = lazy_exports(__name__, _EXPORTS)  # they import torch; the schemas do not
