"""Two "hosts" for the multi-host tests: Linux network namespaces the test makes itself.

:class:`Hosts` makes two network namespaces (``gnsh<pid>-0``, ``gnsh<pid>-1``: unique per test
process, so parallel runs do not collide), joined by a veth pair with the addresses
``10.213.X.1`` and ``10.213.X.2`` (``/30``; a private range that exists only inside those two
namespaces: the machine's own network never sees it), each with its loopback up. Each host
runs ``torchrun --nnodes=2`` in its namespace (``ip netns exec``) with the c10d rendezvous on
host 0's address, and has its own folder (``root/host<i>``: its own copy of the data, its own
run folders), so nothing reaches the other host except over the veth.

Where namespaces cannot be made (not root, no ``ip``, no kernel support),
:func:`namespaces_unavailable` says why; ``Hosts(kind="loopback")`` then runs the two torchrun
"nodes" on 127.0.0.1 instead (same folders, same commands). ``GNNSCALE_TEST_HOSTS=loopback``
forces that variant.

Clean-up is guaranteed however the test ends (failure, timeout, KeyboardInterrupt): on the way
out every process started here is killed -- in a namespace every process it holds (``ip netns
pids``), on loopback each torchrun agent's whole process tree -- and the namespaces (with the
veth pair in them) are deleted.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests._train import descendants

ROOT = Path(__file__).resolve().parents[1]
NETNS_DIR = Path("/run/netns")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def namespaces_unavailable() -> str | None:
    """Why this process cannot make network namespaces, or None when it can (it tries one)."""
    if os.environ.get("GNNSCALE_TEST_HOSTS") == "loopback":
        return "GNNSCALE_TEST_HOSTS=loopback"
    if not sys.platform.startswith("linux"):
        return f"network namespaces are Linux-only (this is {sys.platform})"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2) on this host"
    if os.geteuid() != 0:
        return "making network namespaces needs root (CAP_SYS_ADMIN)"
    probe = f"gnsh{os.getpid()}-probe"
    try:
        made = _ip("netns", "add", probe, check=False)
        if made.returncode != 0:
            return f"`ip netns add` failed: {made.stderr.strip()}"
        return None
    finally:
        _ip("netns", "del", probe, check=False)


class Hosts:
    """Two hosts (namespaces, or loopback) that each run torchrun; a context manager."""

    def __init__(self, root: Path, kind: str = "netns", nproc: int = 2) -> None:
        if kind not in ("netns", "loopback"):
            raise ValueError(f"kind must be netns or loopback, got {kind!r}")
        self.root, self.kind, self.nproc = Path(root), kind, nproc
        pid = os.getpid()
        self.ns = [f"gnsh{pid}-{i}" for i in range(2)]
        self.veth = [f"gnv{pid % 10**9}{'ab'[i]}"[:15] for i in range(2)]
        base = f"10.213.{pid % 256}"  # only these two namespaces ever see it
        self.addr = ([f"{base}.1", f"{base}.2"] if kind == "netns"
                     else ["127.0.0.1", "127.0.0.1"])
        self.procs: list[list[subprocess.Popen]] = [[], []]  # per host: its torchrun agents
        self._made: list[str] = []

    # -- the two namespaces ------------------------------------------------------------------
    def __enter__(self) -> Hosts:
        try:
            if self.kind == "netns":
                self._make_namespaces()
            for i in range(2):
                self.folder(i).mkdir(parents=True, exist_ok=True)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _make_namespaces(self) -> None:
        for ns in self.ns:
            _ip("netns", "add", ns)
            self._made.append(ns)
        a, b = self.veth
        _ip("link", "add", a, "type", "veth", "peer", "name", b)
        try:
            for i in range(2):
                _ip("link", "set", self.veth[i], "netns", self.ns[i])
        except BaseException:
            _ip("link", "del", a, check=False)  # still in this namespace: remove it here
            raise
        for i in range(2):
            _ip("-n", self.ns[i], "addr", "add", f"{self.addr[i]}/30", "dev", self.veth[i])
            _ip("-n", self.ns[i], "link", "set", "lo", "up")
            _ip("-n", self.ns[i], "link", "set", self.veth[i], "up")

    def folder(self, i: int) -> Path:
        """Host ``i``'s own folder (its data copy in ``data/``, its run folders)."""
        return self.root / f"host{i}"

    # -- processes ---------------------------------------------------------------------------
    def torchrun(self, i: int, port: int, args: list[str], env: dict | None = None,
                 log: Path | None = None) -> subprocess.Popen:
        """Start ``torchrun --nnodes=2 --nproc-per-node=nproc ... <args>`` as host ``i``, its
        rendezvous (c10d) on host 0's address at ``port``; output to ``log``."""
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2",
               f"--nproc-per-node={self.nproc}", "--rdzv-backend=c10d",
               f"--rdzv-endpoint={self.addr[0]}:{port}", f"--rdzv-id=gnsh{os.getpid()}",
               "--max-restarts=0",
               # torchrun names a node by its host name (socket.getfqdn()), which resolves to
               # the machine's address, not the namespace's: name it by its own address, and
               # say which node hosts the rendezvous (its heuristic matches host names too)
               f"--local-addr={self.addr[i]}", f"--rdzv-conf=is_host={int(i == 0)}", *args]
        if self.kind == "netns":
            cmd = ["ip", "netns", "exec", self.ns[i], *cmd]
        full_env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1",
                    "OMP_NUM_THREADS": "1", **(env or {})}
        out = open(log, "w") if log is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            if log is not None:
                out.close()
        self.procs[i].append(proc)
        return proc

    def pids(self, i: int) -> list[int]:
        """Every process of host ``i``: its namespace's, or its torchrun agent's tree."""
        if self.kind == "netns":
            got = _ip("netns", "pids", self.ns[i], check=False).stdout.split()
            return [int(p) for p in got if p.isdigit()]
        return [pid for p in self.procs[i] if p.poll() is None
                for pid in (p.pid, *descendants(p.pid))]

    def kill_host(self, i: int) -> list[int]:
        """SIGKILL every process of host ``i`` at once (the host vanishes); the pids."""
        pids = self.pids(i)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    def close(self) -> None:
        """Kill every process started here (namespaces: every process in them), then delete
        the namespaces and the veth pair."""
        for i in range(2):
            if self.kind == "netns" and self.ns[i] not in self._made:
                continue
            self.kill_host(i)
        for p in (*self.procs[0], *self.procs[1]):
            if p.poll() is None:
                p.kill()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for ns in self._made:
            for _ in range(50):  # the namespace goes once its last process is reaped
                if not self.pids(self.ns.index(ns)):
                    break
                time.sleep(0.1)
            _ip("netns", "del", ns, check=False)  # its veth end goes with it, and the peer
        self._made.clear()
        if self.kind == "netns":
            _ip("link", "del", self.veth[0], check=False)  # made but never moved in


@functools.cache
def hosts_kind() -> tuple[str, str | None]:
    """``("netns", None)`` where namespaces can be made, else ``("loopback", why not)``."""
    why = namespaces_unavailable()
    return ("loopback", why) if why else ("netns", None)


def graph_check_rank(topo) -> None:
    """A rank (for :func:`gnnscale.distributed.spawn`) whose graph's checksum is its rank's:
    rank 1 loaded another graph than rank 0."""
    from types import SimpleNamespace

    from gnnscale.runner.worker import check_same_graph

    graph = SimpleNamespace(meta={"checksum": f"graph-{topo.rank}"})
    check_same_graph(graph, topo, f"/data/host{topo.rank}")
