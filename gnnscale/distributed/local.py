"""Launch option ``dist=local``: torchrun's environment when present, else local processes.

Multi-node runs go through torchrun (see docs/distributed.md); a single host needs nothing:
``dist.world_size`` processes are spawned on free loopback ports, every listener of theirs on
loopback; under torchrun gloo's and NCCL's listeners bind to the interface this host reaches
``MASTER_ADDR`` from, unless ``GLOO_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME`` say otherwise.

Under torchrun a rank that cannot reach the store torchrun's agent serves fails at once, naming
the address (:func:`~gnnscale.distributed.topology.check_store_reachable`); once in the group,
the ranks learn which host each is on (:mod:`gnnscale.distributed.peers`), so a collective that
fails because another host went away raises :class:`~gnnscale.distributed.peers.HostLost`
naming that host and its ranks; one that fails by its deadline because a peer stopped answering
(stopped, or its host's link down) names that peer and its host, from their pulses in the
store (:func:`~gnnscale.distributed.peers.silent_host`). One process may train several runs
in turn (a sweep), each in a process group of its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch.distributed as dist

from gnnscale.distributed.device import IFNAME_VARS, listener_env
from gnnscale.distributed.guard import guard_rank, run_temp_dir, socket_dir
from gnnscale.distributed.launch import spawn
from gnnscale.distributed.peers import (
    HostLost,
    Pulse,
    closed_on_this_host,
    gather_peers,
    lost_host,
    silent_host,
    timed_out,
)
from gnnscale.distributed.schemas import LocalDistConfig
from gnnscale.distributed.threads import allowed_cores, binding, default_threads, host_load
from gnnscale.distributed.topology import (
    Backend,
    Device,
    agent_hosts_store,
    check_store_reachable,
    group_prefix,
    resolve_backend,
    topology_from_env,
    under_torchrun,
)


class Launcher:
    """Runs ``fn(topology, *args)`` on every rank and returns the results (rank order).

    Every setting is checked here, in the parent, before any rank starts.
    """

    def __init__(self, world_size: int = 2, backend: str | Backend = "auto",
                 device: str | Device = "auto", timeout_s: float = 300.0,
                 threads_per_rank: int = 0, bind_cores: bool = True,
                 startup_timeout_s: float = 600.0) -> None:
        self.world_size = int(os.environ["WORLD_SIZE"]) if under_torchrun() else world_size
        LocalDistConfig(world_size=self.world_size, backend=backend, device=device,
                        timeout_s=timeout_s, threads_per_rank=threads_per_rank,
                        bind_cores=bind_cores, startup_timeout_s=startup_timeout_s).check()
        self.backend, self.device = resolve_backend(backend, device)  # what this host has
        self.timeout_s, self.threads_per_rank = timeout_s, threads_per_rank
        self.startup_timeout_s = startup_timeout_s
        self.bind_cores = bind_cores

    def _free_threads(self, busy: int) -> int:
        """``dist.threads_per_rank=0``: the free cores shared by the ranks (said in one line
        when other processes keep cores busy)."""
        threads = default_threads(self.world_size, busy)
        if busy:
            print(f"dist.threads_per_rank=0: {threads} thread(s) per rank, {busy} of "
                  f"{allowed_cores()} cores busy with other work (set dist.threads_per_rank "
                  "to choose)", flush=True)
        return threads

    def _plan(self) -> tuple[int, list[int] | None]:
        """Threads per rank, and the cores the spawned ranks are bound to (None: unbound):
        :func:`binding` with ``dist.bind_cores``, several ranks and no torchrun. One 50 ms
        look at the host (:func:`host_load`) serves both."""
        spawned = self.world_size > 1 and not under_torchrun()
        if self.threads_per_rank and not (self.bind_cores and spawned):
            return self.threads_per_rank, None
        load = host_load()
        threads = self.threads_per_rank or self._free_threads(load[0])
        if not (self.bind_cores and spawned):
            return threads, None
        return threads, binding(self.world_size, threads, load)

    def launch(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """``fn(topology, *args)`` on every rank: one rank runs in this process, more are
        spawned from the fork server, under torchrun this process is one of its ranks.

        From here on this process's temp files go to its private folder (``run_temp_dir``),
        removed at its exit, or by the next run when it is killed; its sockets, and its ranks'
        and sampler workers', to :func:`~gnnscale.distributed.guard.socket_dir` (short enough
        for AF_UNIX, or a clear refusal here, before any rank starts)."""
        run_temp_dir()
        socket_dir()
        if not under_torchrun():
            threads, cores = self._plan()
            if self.world_size == 1:
                return [run_here(fn, args, self.backend, self.device, self.timeout_s, threads,
                                 self.startup_timeout_s)]
            return spawn(fn, self.world_size, *args, backend=self.backend, device=self.device,
                         timeout_s=self.timeout_s, threads_per_rank=threads, cores=cores,
                         startup_timeout_s=self.startup_timeout_s)
        guard_rank(os.getppid())  # end with torchrun's agent, however it ends
        if agent_hosts_store():  # listening already: unreachable is an error, said at once
            check_store_reachable(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                                  min(10.0, self.startup_timeout_s))
        # gloo's and NCCL's listeners on the run's network (an interface set here is kept)
        if not all(os.environ.get(key) for key in IFNAME_VARS):
            for key, value in listener_env(os.environ["MASTER_ADDR"]).items():
                os.environ.setdefault(key, value)
        topo = topology_from_env(self.backend, self.device, self.timeout_s,
                                 self.startup_timeout_s)
        pulse = None
        try:
            peers = gather_peers(topo.rank)  # which host each rank is on, to name a lost one
            prefix = pulse_prefix()
            pulse = Pulse(topo.rank, prefix).start()  # to name one that goes quiet
            try:
                return [fn(topo, *args)]
            except Exception as err:
                lost = lost_host(err, peers, topo.rank)
                # nothing closed (or only a rank of this host that gave up waiting first, its
                # own deadline having fired a moment before this one's): who stopped answering
                if lost is None and (timed_out(err) or closed_on_this_host(err, peers,
                                                                           topo.rank)):
                    lost = silent_host(peers, topo.rank, prefix, self.timeout_s, pulse)
                if lost is not None:
                    raise HostLost(lost) from err
                raise
        finally:
            if pulse is not None:
                pulse.stop()
            dist.destroy_process_group()


def pulse_prefix() -> str:
    """A store prefix for the pulses of the process group just joined, its own (every rank
    counts the groups it joined alike: :func:`~gnnscale.distributed.topology.group_prefix`),
    under torchrun's run id."""
    return f"gnnscale/{os.environ.get('TORCHELASTIC_RUN_ID', 'run')}/{group_prefix()}"


def run_here(fn: Callable[..., Any], args: tuple, backend: str, device: str, timeout_s: float,
             threads: int, startup_timeout_s: float | None = None) -> Any:
    """One rank in the launcher itself: no fork server and no rank process to start (a crash
    keeps its traceback, nothing outlives the launcher), a world-1 process group as a spawned
    rank has, and temp files in a private folder removed on the way out."""
    import torch

    from gnnscale.distributed.launch import free_port, private_temp_dir
    from gnnscale.distributed.topology import init_process_group

    owned = not dist.is_initialized()
    before = torch.get_num_threads()
    listeners = listener_env()  # gloo's (and NCCL's) listeners on loopback, as the store
    saved = {key: os.environ.get(key) for key in listeners}
    with private_temp_dir("gnnscale-rank-"):
        torch.set_num_threads(threads)
        os.environ.update(listeners)
        try:
            topo = init_process_group(0, 1, backend=backend, device=device, port=free_port(),
                                      timeout_s=timeout_s, startup_timeout_s=startup_timeout_s)
            return fn(topo, *args)
        finally:
            if owned and dist.is_initialized():
                dist.destroy_process_group()
            torch.set_num_threads(before)
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

