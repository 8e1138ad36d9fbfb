"""The one device seam: every decision that depends on the kind of device lives here.

Per rank it decides the compute device (:func:`bind`), the backend of every process group by
its purpose (:func:`group_backend`: the world and the groups that carry model tensors take the
world's backend; the groups that carry samples, jobs and plans built on the host stay on
gloo), where a group's tensors live (:func:`comm_device`: the device under nccl, the host
under gloo, by construction), whether host buffers are pinned (:func:`host_empty`,
:func:`pinned`) and whether copies are non-blocking (:func:`to_device`), and it reads the
device's memory (:func:`peak_allocated`, :func:`free_bytes`) and RNG (:func:`rng_states`).
No other module of gnnscale calls ``torch.cuda`` (``tests/distributed/test_device.py`` checks it).

It also decides where a rank's own listeners bind (:func:`listener_env`): gloo's pair
listeners and NCCL's bootstrap otherwise bind to the address the host name resolves to, which
may be on the network while the run's store is on loopback. A single-host run binds them to
the loopback interface, a multi-host run to the interface holding the address this host
reaches ``MASTER_ADDR`` from.
"""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct
import sys
from collections.abc import Sequence
from enum import Enum

import torch
import torch.distributed as dist

HOST = torch.device("cpu")


class Purpose(str, Enum):
    """What a process group carries, which decides its backend."""

    world = "world"  # gradients, metrics, evaluation: the compute device's tensors
    shuffle = "shuffle"  # hidden rows between layers (split, fullgraph): device tensors
    trainers = "trainers"  # the trainers' gradient all-reduce (factored): device tensors
    host = "host"  # samples, split plans, queue jobs, step reductions built on the host


def cuda_available() -> bool:
    """Whether this host has a usable CUDA device."""
    return torch.cuda.is_available()


def bind(kind: str, local_rank: int) -> torch.device:
    """The compute device of the rank with host-local rank ``local_rank``: ``cpu``, or the
    GPU ``local_rank mod count``, made the current one (``kind`` as resolved: cpu or cuda)."""
    if kind != "cuda":
        return HOST
    index = local_rank % torch.cuda.device_count()
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def group_backend(purpose: Purpose | str, world_backend: str | None = None) -> str:
    """The backend of a group that carries ``purpose``: gloo for host-built data (samples,
    plans, jobs), else the world's backend (nccl on GPUs, gloo on CPUs)."""
    if Purpose(purpose) is Purpose.host:
        return "gloo"
    return world_backend or (dist.get_backend() if dist.is_initialized() else "gloo")


def comm_device(group: dist.ProcessGroup | None = None) -> torch.device:
    """Where a collective's tensors on ``group`` must live: this rank's GPU under nccl, else
    the host."""
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return HOST


def is_accelerator(device: torch.device) -> bool:
    """Whether ``device`` is a GPU (copies to it are asynchronous, host buffers pinned)."""
    return torch.device(device).type == "cuda"


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``t`` on ``device``; non-blocking to a GPU (from pinned memory it overlaps)."""
    return t.to(device, non_blocking=is_accelerator(device))


def host_empty(shape: Sequence[int] | int, device: torch.device,
               dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """An empty host buffer that feeds ``device``: pinned when it is a GPU."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return torch.empty(shape, dtype=dtype, pin_memory=is_accelerator(device))


def pinned(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``t`` in pinned host memory when it will be copied to a GPU, else ``t`` (contiguous)."""
    return t.pin_memory() if is_accelerator(device) else t.contiguous()


def synchronize(device: torch.device) -> None:
    """Wait for ``device``'s queued work (timing); nothing on the host."""
    if is_accelerator(device):
        torch.cuda.synchronize(device)


def reset_peak(device: torch.device) -> None:
    """Start a new peak-memory window on ``device`` (GPU only)."""
    if is_accelerator(device):
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)


def peak_allocated(device: torch.device) -> int | None:
    """The allocator's peak bytes on ``device`` since :func:`reset_peak`; None on the host
    (no allocator reading there)."""
    if is_accelerator(device):
        return int(torch.cuda.max_memory_allocated(device))
    return None


def free_bytes(device: torch.device) -> int:
    """Free memory on a GPU ``device`` now; ValueError on the host."""
    if not is_accelerator(device):
        raise ValueError(f"no free-memory reading on {device}: it is not a GPU")
    return int(torch.cuda.mem_get_info(torch.device(device))[0])


def release_cached(device: torch.device) -> None:
    """Return the allocator's cached, unused blocks on a GPU ``device``."""
    if is_accelerator(device):
        torch.cuda.empty_cache()


def rng_devices(device: torch.device) -> list[torch.device]:
    """The devices whose RNG ``torch.random.fork_rng`` must save for work on ``device``."""
    return [device] if is_accelerator(device) else []


def rng_states() -> list[torch.Tensor] | None:
    """Every GPU's RNG state (None without CUDA), for checkpoints."""
    return torch.cuda.get_rng_state_all() if cuda_available() else None


def set_rng_states(states: list[torch.Tensor] | None) -> None:
    """Restore what :func:`rng_states` returned (nothing without CUDA or without states)."""
    if states is not None and cuda_available():
        torch.cuda.set_rng_state_all(states)


def ddp_device_ids(device: torch.device) -> list[int] | None:
    """``device_ids`` for DistributedDataParallel on ``device``."""
    return [device.index] if is_accelerator(device) else None


# -- where a rank's listeners bind ------------------------------------------------------------
#: The variables gloo and NCCL read for the interface their listeners bind to.
IFNAME_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
_SIOCGIFADDR = 0x8915  # Linux: an interface's IPv4 address


def _ipv4_of(name: str) -> str | None:
    """The IPv4 address of interface ``name`` (Linux), None when it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR,
                                 struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def interface_address(name: str) -> str | None:
    """The IPv4 address of interface ``name`` (Linux), None when it has none or it cannot be
    read here."""
    return _ipv4_of(name) if sys.platform.startswith("linux") else None


def interface_of(addr: str) -> str | None:
    """The name of the interface holding the IPv4 address ``addr`` (any 127.x address: the
    loopback interface), None when no interface holds it or it cannot be read here."""
    ip = ipaddress.ip_address(addr)
    for _, name in socket.if_nameindex():
        own = _ipv4_of(name) if sys.platform.startswith("linux") else None
        if own is None:
            continue
        if ipaddress.ip_address(own) == ip or (ip.is_loopback
                                               and ipaddress.ip_address(own).is_loopback):
            return name
    if ip.is_loopback:  # no reading (not Linux): the usual names
        return "lo0" if sys.platform == "darwin" else "lo"
    return None


def source_address(master_addr: str) -> str:
    """The local IPv4 address this host reaches ``master_addr`` from (its route; nothing is
    sent): the address of the run's own network here."""
    target = socket.getaddrinfo(master_addr, None, socket.AF_INET)[0][4][0]
    if ipaddress.ip_address(target).is_loopback:
        return "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((target, 9))  # a UDP "connect" only picks the route
        return s.getsockname()[0]


def listener_env(master_addr: str | None = None) -> dict[str, str]:
    """The environment that binds gloo's and NCCL's listeners of a rank where the run is: on
    the loopback interface for a single-host run (``master_addr`` None, or a loopback
    address), else on the interface holding :func:`source_address` (``MASTER_ADDR``'s
    route). Raises ``ValueError`` when no interface holds that address."""
    addr = "127.0.0.1" if master_addr is None else source_address(master_addr)
    name = interface_of(addr)
    if name is None:
        raise ValueError(f"no network interface of this host holds {addr}, the address it "
                         f"reaches MASTER_ADDR={master_addr} from: set GLOO_SOCKET_IFNAME "
                         "to the interface of the run's network")
    return dict.fromkeys(IFNAME_VARS, name)
