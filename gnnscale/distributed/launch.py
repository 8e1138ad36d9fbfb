"""Start ranks: under torchrun use its environment, otherwise spawn local processes.

A rank that raises sends its traceback to the parent, which stops the other ranks within a
grace period and raises :class:`RankFailed` naming the rank; nothing hangs.
"""

from __future__ import annotations

import os
import pickle
import queue
import socket
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


class RankFailed(RuntimeError):
    """A rank raised or died; the message carries its traceback."""


@dataclass
class Topology:
    """Where this process sits: global rank, world, its host-local rank and device."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    device: torch.device

    @property
    def is_leader(self) -> bool:
        return self.rank == 0


def stop_processes(procs: list, grace_s: float = 0.0) -> None:
    """Give ``procs`` ``grace_s`` seconds to exit, then terminate, then kill what remains."""
    end = time.monotonic() + grace_s
    for p in procs:
        p.join(timeout=max(0.0, end - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.terminate()
            p.join(timeout=5)
        if p.is_alive():
            p.kill()
            p.join(timeout=2)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def under_torchrun() -> bool:
    """True when torchrun (or another elastic launcher) set up this process."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def pick_device(device: str, local_rank: int) -> torch.device:
    """``auto`` means this rank's GPU when CUDA is there, else the CPU."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("dist.device=cuda but CUDA is not available; use dist.device=cpu")
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def init_process_group(
    rank: int,
    world_size: int,
    *,
    backend: str = "auto",
    device: str = "auto",
    addr: str = "127.0.0.1",
    port: int | None = None,
    timeout_s: float = 300.0,
    local_rank: int | None = None,
    local_world_size: int | None = None,
) -> Topology:
    """Join the process group (gloo on CPU, nccl on CUDA when ``backend=auto``)."""
    local_rank = rank if local_rank is None else local_rank
    dev = pick_device(device, local_rank)
    if backend == "auto":
        backend = "nccl" if dev.type == "cuda" else "gloo"
    if not dist.is_initialized():
        init = f"tcp://{addr}:{port}" if port else "env://"
        dist.init_process_group(
            backend, init_method=init, rank=rank, world_size=world_size,
            timeout=timedelta(seconds=timeout_s),
        )
    return Topology(rank, world_size, local_rank,
                    local_world_size or world_size, dev)


def topology_from_env(backend: str = "auto", device: str = "auto",
                      timeout_s: float = 300.0) -> Topology:
    """Join the process group described by torchrun's environment variables."""
    return init_process_group(
        int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), backend=backend, device=device,
        timeout_s=timeout_s, local_rank=int(os.environ.get("LOCAL_RANK", 0)),
        local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", 1)),
    )


def _worker(rank, world_size, fn, args, port, backend, device, timeout_s, results, threads):
    torch.set_num_threads(threads)
    try:
        topo = init_process_group(rank, world_size, backend=backend, device=device, port=port,
                                  timeout_s=timeout_s)
        out = fn(topo, *args)
        results.put((rank, True, pickle.dumps(out)))
    except BaseException:  # noqa: BLE001 - everything must reach the parent
        results.put((rank, False, traceback.format_exc()))
        raise SystemExit(1) from None
    finally:
        if dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:  # noqa: BLE001
                pass


def spawn(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    backend: str = "gloo",
    device: str = "cpu",
    timeout_s: float = 120.0,
    grace_s: float = 10.0,
    threads_per_rank: int | None = None,
) -> list[Any]:
    """Run ``fn(topology, *args)`` on ``world_size`` local ranks; return results in rank order.

    ``fn`` must be importable (module level). Raises :class:`RankFailed` with the first failing
    rank's traceback; the other ranks are terminated after ``grace_s`` seconds.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    threads = threads_per_rank or max(1, (os.cpu_count() or 1) // world_size)
    # not daemonic: a rank may start processes of its own (sampler workers); the ``finally``
    # below terminates every rank however the run ends
    procs = [
        ctx.Process(target=_worker, args=(r, world_size, fn, args, port, backend, device,
                                          timeout_s, results, threads), daemon=False)
        for r in range(world_size)
    ]
    for p in procs:
        p.start()
    outs: dict[int, Any] = {}
    failure: str | None = None
    deadline = None
    try:
        while len(outs) < world_size and failure is None:
            try:
                rank, ok, payload = results.get(timeout=0.2)
            except queue.Empty:
                dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0)
                        and r not in outs]
                if dead and deadline is None:
                    deadline = time.monotonic() + grace_s  # let its traceback arrive
                if deadline is not None and time.monotonic() > deadline:
                    failure = (f"rank {dead[0]} exited with code {procs[dead[0]].exitcode} "
                               "without a traceback")
                continue
            if ok:
                outs[rank] = pickle.loads(payload)
            else:
                failure = f"rank {rank} failed:\n{payload}"
    finally:
        stop_processes(procs, grace_s if failure is not None else 0.0)
    if failure is not None:
        raise RankFailed(failure)
    return [outs[r] for r in range(world_size)]
