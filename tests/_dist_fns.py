"""Module-level rank functions for the multi-process tests (spawn needs importable targets)."""

import torch
import torch.distributed as dist


def allreduce_rank(topo, value):
    t = torch.tensor([float(value + topo.rank)])
    dist.all_reduce(t)
    return t.item()


def fail_on_rank1(topo):
    if topo.rank == 1:
        raise ValueError("boom on rank 1")
    dist.barrier()  # rank 0 would wait here forever without the launcher's handling
    return topo.rank


def environment(topo, key):
    """This rank's view of the launcher: ``(os.environ[key], cwd, parent is a fork server)``."""
    import os

    parent = open(f"/proc/{os.getppid()}/cmdline").read() if os.path.exists("/proc") else ""
    return os.environ.get(key), os.getcwd(), "forkserver" in parent
