"""Process groups, topology and launching ranks (gloo on CPU, nccl on CUDA)."""

from gnnscale.distributed.launch import RankFailed, Topology, free_port, spawn

__all__ = ["RankFailed", "Topology", "free_port", "spawn"]
