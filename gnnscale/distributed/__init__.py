"""Process groups, topology and launching ranks (gloo on CPU, nccl on CUDA)."""

from gnnscale.distributed.launch import RankFailed, Topology, free_port, spawn
from gnnscale.distributed.topology import Backend, Device, resolve_backend

__all__ = ["Backend", "Device", "RankFailed", "Topology", "free_port", "resolve_backend", "spawn"]
