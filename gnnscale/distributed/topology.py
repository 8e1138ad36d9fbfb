"""Where a rank sits (world, host-local rank, device) and joining the process group.

The backend and device are resolved in one place, :func:`resolve_backend`, for spawned ranks
and torchrun alike: ``auto`` means nccl on CUDA and gloo on the CPU; the rank's device is
bound by the device seam (:mod:`gnnscale.distributed.device`).

The rendezvous store (a ``TCPStore``, which has no authentication) listens only where the run's
ranks reach it: a single-host run's on 127.0.0.1, a multi-host run's on the address of
``MASTER_ADDR`` (torchrun's agent, when it hosts the store, binds its own). The process group,
its store and every subgroup made by :func:`gnnscale.distributed.collectives.new_group` share
the run's deadline, ``dist.timeout_s`` (:func:`run_timeout`), armed once every rank has joined:
joining itself (the store's connections, the backend's rendezvous) runs under the start-up
deadline, ``dist.startup_timeout_s`` (:func:`startup_timeout`), so a rank slow to start on a
busy host does not spend the run's deadline. A process that joins several
groups in turn (the runs of a sweep under torchrun, which share torchrun's store) keeps each
group's keys apart (:func:`group_prefix`).
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum

import torch
import torch.distributed as dist

from gnnscale.distributed import device as device_seam
from gnnscale.distributed.schemas import (  # noqa: F401 - re-exported
    Backend,
    Device,
    under_torchrun,
)


@dataclass
class Topology:
    """Where this process sits: global rank, world, its host-local rank and device."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    device: torch.device


def _value(choice: str | Enum) -> str:
    return choice.value if isinstance(choice, Enum) else str(choice)


def resolve_backend(backend: str | Backend = "auto", device: str | Device = "auto",
                    cuda_available: bool | None = None) -> tuple[str, str]:
    """``(backend, device)`` with ``auto`` resolved; raises ``ValueError`` naming the setting
    to change when the pair cannot work on this host."""
    backend, device = _value(backend), _value(device)
    if backend not in Backend.__members__:
        raise ValueError(f"dist.backend must be one of {list(Backend.__members__)}, "
                         f"got {backend!r}")
    if device not in Device.__members__:
        raise ValueError(f"dist.device must be one of {list(Device.__members__)}, got {device!r}")
    cuda = device_seam.cuda_available() if cuda_available is None else cuda_available
    if backend == "nccl" and not cuda:
        raise ValueError("dist.backend=nccl needs CUDA, which this host lacks: set "
                         "dist.backend=gloo (or auto)")
    if backend == "nccl" and device == "cpu":
        raise ValueError("dist.backend=nccl cannot carry CPU tensors (dist.device=cpu): set "
                         "dist.backend=gloo (or auto), or dist.device=cuda")
    if device == "cuda" and not cuda:
        raise ValueError("dist.device=cuda but CUDA is not available on this host: set "
                         "dist.device=cpu (or auto)")
    if device == "auto":
        device = "cuda" if cuda and backend != "gloo" else "cpu"
    if backend == "auto":
        backend = "nccl" if device == "cuda" else "gloo"
    return backend, device


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_run_timeout: list[timedelta] = []  # the deadline this process's group was created with
_startup_timeout: list[timedelta] = []  # ... and the one it joined under
_generation = [0]  # process groups this process has joined (each one's keys apart)
_excepthook: list = []  # sys.excepthook before the first group (torch wraps it per group)


def run_timeout() -> timedelta | None:
    """The deadline (``dist.timeout_s``) the process group was created with by
    :func:`init_process_group`; None when this process has none from it."""
    return _run_timeout[-1] if _run_timeout else None


def startup_timeout() -> timedelta | None:
    """The start-up deadline (``dist.startup_timeout_s``) the process group was joined under
    by :func:`init_process_group`; None when this process has none from it."""
    return _startup_timeout[-1] if _startup_timeout else None


def listening_socket(addr: str, port: int) -> socket.socket:
    """A TCP socket listening on ``addr`` only (not on every interface), at ``port`` (0: any
    free one)."""
    family, kind, proto, _, where = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(where)
        sock.listen(socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    return sock


def rendezvous_store(addr: str, port: int, world_size: int, *, serve: bool,
                     timeout: timedelta) -> dist.TCPStore:
    """The run's ``TCPStore`` at ``addr:port``: the server (``serve``, rank 0) listens on
    ``addr``'s interface only, the others connect to it; every wait on it ends after
    ``timeout``.

    ``TCPStore(host, port, is_master=True)`` itself listens on every interface; the server
    here listens on a socket bound to ``addr`` and hands it over (``master_listen_fd``)."""
    if not serve:
        return dist.TCPStore(addr, port, world_size, False, timeout)
    fd = listening_socket(addr, port).detach()  # the store owns (and closes) it from here
    try:
        return dist.TCPStore(addr, port, world_size, True, timeout, master_listen_fd=fd)
    except BaseException:
        os.close(fd)
        raise


def agent_hosts_store() -> bool:
    """True when torchrun's agent hosts the rendezvous store and every rank is its client."""
    return os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"


def check_store_reachable(addr: str, port: int, timeout_s: float = 10.0) -> None:
    """Under torchrun with its agent hosting the store (listening before any rank starts): a
    rank that cannot connect to ``addr:port`` fails at once, naming the address and the usual
    cause, instead of retrying until the run's deadline. torchrun names node 0 by its host name
    (``socket.getfqdn()``) unless told ``--local-addr``; where that name resolves to a loopback
    or another network's address, the other hosts cannot reach it."""
    try:
        with socket.create_connection((addr, port), timeout=timeout_s):
            return
    except OSError as err:
        reason = err.strerror or type(err).__name__
    try:
        resolved = socket.getaddrinfo(addr, None, socket.AF_INET)[0][4][0]
    except OSError:
        resolved = "nothing"
    raise RuntimeError(
        f"cannot reach the run's rendezvous store at MASTER_ADDR={addr} (resolves to "
        f"{resolved} here), port {port}: {reason}. torchrun names its node 0 by its host name "
        "unless told otherwise: start torchrun on every host with --local-addr=<the address "
        "the other hosts reach that host by> (and --rdzv-conf=is_host=1 on the host of "
        "--rdzv-endpoint when its address is not its host name's)")


def group_prefix() -> str:
    """The store prefix of the next process group this process joins: ``default_pg`` (the
    prefix torch's own ``init_method`` rendezvous adds) for the first, ``default_pg/<n>`` for
    the n-th after. Under torchrun every run of a process (a sweep's jobs, a script training
    several configs) meets in the same store, torchrun's, where the previous group's keys
    (its ranks' addresses, its barriers' counts) are still set: each group keeps to its own.
    Every rank joins and leaves the same groups in the same order, so they agree on ``n``."""
    n = _generation[0]
    return "default_pg" if n == 0 else f"default_pg/{n}"


#: the store keys of :func:`meet`: the ranks counted in, then the mark the last one sets
_STARTED, _ALL_STARTED = "gnnscale/started", "gnnscale/all_started"


def meet(store: dist.Store, world_size: int, timeout: timedelta) -> None:
    """Wait, at most ``timeout`` (the start-up deadline), until all ``world_size`` ranks of the
    group have reached this point: each counts itself in at ``store``, the last one in marks
    the group complete. A rank not there in time is a ``RuntimeError`` saying the start-up
    deadline passed (the launcher names the rank that did not start)."""
    if store.add(_STARTED, 1) >= world_size:
        store.set(_ALL_STARTED, "1")
        return
    try:
        store.wait([_ALL_STARTED], timeout)
    except Exception as err:  # noqa: BLE001 - the store's own words vary by version
        try:
            joined = int(store.add(_STARTED, 0))
        except Exception:  # noqa: BLE001
            joined = -1
        seen = f"{joined} of {world_size}" if joined >= 0 else f"not all {world_size}"
        raise RuntimeError(f"timed out after {timeout.total_seconds():g} s (the start-up "
                           f"deadline, dist.startup_timeout_s) waiting for the ranks to start: "
                           f"{seen} joined ({type(err).__name__}: {err})") from None


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
    startup_timeout_s: float | None = None,
) -> Topology:
    """Join the process group (backend and device as :func:`resolve_backend` says).

    With ``port`` the store is at ``addr:port`` and rank 0 serves it, listening on ``addr``
    only (127.0.0.1 for a single-host run); without, torchrun's ``MASTER_ADDR`` and
    ``MASTER_PORT`` say where (rank 0 serves it on ``MASTER_ADDR``'s interface unless
    torchrun's agent hosts it). ``startup_timeout_s`` (None: ``timeout_s``) bounds joining:
    connecting to the store and waiting there for every rank to start (:func:`meet`). Once
    all are up, ``timeout_s`` is the deadline of the backend's rendezvous and of every
    collective, send, receive and store wait, in subgroups too (:func:`run_timeout`)."""
    local_rank = rank if local_rank is None else local_rank
    backend, device = resolve_backend(backend, device)
    dev = device_seam.bind(device, local_rank)
    if not dist.is_initialized():
        timeout = timedelta(seconds=timeout_s)
        startup = timedelta(seconds=timeout_s if startup_timeout_s is None
                            else startup_timeout_s)
        if not port:
            addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        store = rendezvous_store(addr, port, world_size, timeout=startup,
                                 serve=rank == 0 and not agent_hosts_store())
        if _excepthook:  # torch prefixes tracebacks with "[rankN]:" once per group joined
            sys.excepthook = _excepthook[0]
        else:
            _excepthook.append(sys.excepthook)
        prefixed = dist.PrefixStore(group_prefix(), store)
        meet(prefixed, world_size, startup)
        # every rank is up: the run's deadline from here on (the backend's own rendezvous,
        # with every rank there, and each collective and send or receive after it)
        store.set_timeout(timeout)
        dist.init_process_group(backend, store=prefixed, rank=rank, world_size=world_size,
                                timeout=timeout)
        _generation[0] += 1
        _run_timeout[:] = [timeout]
        _startup_timeout[:] = [startup]
    return Topology(rank, world_size, local_rank, local_world_size or world_size, dev)


def topology_from_env(backend: str = "auto", device: str = "auto",
                      timeout_s: float = 300.0, startup_timeout_s: float | None = None
                      ) -> Topology:
    """Join the process group described by torchrun's environment variables (joining under
    ``startup_timeout_s``, then ``timeout_s``: :func:`init_process_group`)."""
    return init_process_group(
        int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), backend=backend, device=device,
        timeout_s=timeout_s, local_rank=int(os.environ.get("LOCAL_RANK", 0)),
        local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", 1)),
        startup_timeout_s=startup_timeout_s,
    )
