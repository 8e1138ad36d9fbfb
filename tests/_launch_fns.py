"""Module-level rank functions for the launch and processed-data tests (spawn needs importable
targets)."""

import os
import signal
import tempfile
import time
from pathlib import Path

import torch.distributed as dist


def killed_after_barrier(topo):
    """Rank 1 is SIGKILLed after the first barrier; rank 0 then fails in the next one."""
    dist.barrier()
    if topo.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
    dist.barrier()
    return topo.rank


def hold_then_killed(topo, mib, seen):
    """Rank 1 fills ``mib`` MiB, waits until the launcher has seen it held (the test's file
    ``seen`` appears), then is SIGKILLed."""
    dist.barrier()
    if topo.rank == 1:
        held = bytearray(mib * 2**20)
        held[::4096] = b"x" * len(held[::4096])  # resident, page by page
        deadline = time.monotonic() + 120
        while not Path(seen).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGKILL)
    dist.barrier()
    return topo.rank


def train_forever(topo, pid_dir):
    """Record this rank's pid, then synchronise forever (what an endless run looks like)."""
    Path(pid_dir, f"rank{topo.rank}.pid").write_text(str(os.getpid()))
    while True:
        dist.barrier()
        time.sleep(0.05)


def pyg_temp_files(topo):
    """Build a PyG conv (it writes a generated module to the temp folder); return that folder
    and what it holds."""
    from torch_geometric.nn import SAGEConv

    SAGEConv(4, 4)
    folder = tempfile.gettempdir()
    return folder, sorted(os.listdir(folder))


def save_repeatedly(graph_path, folder, seconds):
    """Publish the same processed graph to ``folder`` again and again (a concurrent writer)."""
    from gnnscale.data import processed

    graph = processed.load(graph_path, mmap=False)
    end = time.monotonic() + seconds
    saves = 0
    while time.monotonic() < end:
        processed.save(graph, folder)
        saves += 1
    return saves


def listening_addresses(topo):
    """Every TCP address this rank listens on once the world group and a gloo subgroup have
    carried a collective (gloo's pair listeners, the store's on rank 0)."""
    import psutil

    from gnnscale.distributed.collectives import new_group

    group = new_group(list(range(topo.world_size)), purpose="host")
    dist.barrier()
    dist.barrier(group=group)
    return sorted({c.laddr.ip for c in psutil.Process().net_connections(kind="tcp")
                   if c.status == psutil.CONN_LISTEN})
