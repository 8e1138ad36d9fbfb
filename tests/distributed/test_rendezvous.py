"""The rendezvous store is reachable only by the run's own hosts: a single-host run's listens on
127.0.0.1 only, a multi-host run's on ``MASTER_ADDR``'s interface only.

Only this machine's own addresses are ever connected to (the UDP ``connect`` that finds the
non-loopback one sends nothing)."""

import errno
import socket
from datetime import timedelta

import pytest
import torch.distributed as dist

from gnnscale.distributed.topology import (
    free_port,
    init_process_group,
    run_timeout,
)

LOOPBACK = "127.0.0.1"


def host_address() -> str:
    """This host's non-loopback IPv4 address (the one its default route leaves from); skips
    the test when it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.254", 9))  # UDP: picks a route and source, sends nothing
            addr = s.getsockname()[0]
        except OSError as err:
            pytest.skip(f"this host has no route off loopback ({err})")
    if addr.startswith("127.") or addr == "0.0.0.0":
        pytest.skip(f"this host has no non-loopback address (got {addr})")
    return addr


def connects(addr: str, port: int) -> bool:
    """Whether a TCP connection to ``addr:port`` (this host's) is accepted; False when
    refused."""
    try:
        with socket.create_connection((addr, port), timeout=5):
            return True
    except OSError as err:
        if err.errno == errno.ECONNREFUSED:
            return False
        raise


@pytest.fixture
def world_of_one():
    """Destroys the process group a test made in this process."""
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


def test_single_host_store_listens_on_loopback_only(world_of_one):
    """As a single-host run starts it (rank 0 of a spawned run, or a 1-rank run in the
    launcher): reachable on 127.0.0.1, refused on the host's network address."""
    external = host_address()
    port = free_port()
    init_process_group(0, 1, backend="gloo", device="cpu", port=port, timeout_s=30)
    assert connects(LOOPBACK, port)
    assert not connects(external, port), f"the store answers on {external}:{port}"


def test_multi_host_store_listens_on_the_master_address_only(world_of_one, monkeypatch):
    """Rank 0 of a multi-host run (torchrun's variables, the store not hosted by torchrun's
    agent) serves the store on MASTER_ADDR's interface only."""
    external = host_address()
    port = free_port()
    monkeypatch.setenv("MASTER_ADDR", external)
    monkeypatch.setenv("MASTER_PORT", str(port))
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    init_process_group(0, 1, backend="gloo", device="cpu", timeout_s=30)
    assert connects(external, port)
    assert not connects(LOOPBACK, port), f"the store answers on {LOOPBACK}:{port}"


def test_store_and_group_carry_the_run_deadline(world_of_one):
    init_process_group(0, 1, backend="gloo", device="cpu", port=free_port(), timeout_s=17)
    assert run_timeout() == timedelta(seconds=17)
    assert dist.distributed_c10d._get_default_store().timeout == timedelta(seconds=17)

