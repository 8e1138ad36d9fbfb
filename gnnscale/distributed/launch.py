"""Start ranks: under torchrun use its environment, otherwise spawn local processes.

When a rank fails, the launcher names the rank that failed first -- its exit code or signal
and its traceback -- before what the others reported as a consequence (a peer's "connection
reset"), stops the remaining ranks within a grace period and raises :class:`RankFailed`.
Ranks die with the launcher (see :mod:`gnnscale.distributed.guard`); SIGTERM to the launcher
stops them cleanly and exits non-zero. A rank that stops answering (stopped by SIGSTOP, or
stuck) makes its peers' collectives time out after ``dist.timeout_s``; the launcher then names
that rank first, not the peers that timed out, and ends every rank at once. Starting the ranks
and their rendezvous run under a deadline of their own, ``dist.startup_timeout_s`` (generous:
a busy host may take long to start a process), and the run's deadline arms once every rank has
joined; a rank that does not finish starting is named as such, with the start-up deadline.

Temp files (PyG's generated modules, the ranks' folders, the fork server's socket) go to the
launching process's private folder (:func:`~gnnscale.distributed.guard.run_temp_dir`), removed
at its exit or, after a SIGKILL, by the next run.

A rank's listeners (the store's, gloo's pair listeners, NCCL's bootstrap) bind to loopback
(:func:`~gnnscale.distributed.device.listener_env`), whatever the host name resolves to and
whatever interface the launcher's environment names.

Ranks start from a fork server that has imported torch, PyG and gnnscale once
(:data:`PRELOAD`), so a rank starts in a fraction of a second instead of spending ~5 s of CPU
on imports; where the platform has no fork server, or ``GNNSCALE_START_METHOD=spawn``, ranks
are spawned fresh. Either way a rank gets the launcher's environment as it is at launch.
"""

from __future__ import annotations

import os
import pickle
import queue
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing import forkserver
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from gnnscale.distributed.device import listener_env
from gnnscale.distributed.guard import (
    Terminated,
    guard_rank,
    is_stopped,
    launcher_signals,
    process_state,
    resident_bytes,
    run_temp_dir,
    sigint_blocked,
    socket_dir,
)
from gnnscale.distributed.threads import bind_rank, binding
from gnnscale.distributed.topology import (  # noqa: F401 - re-exported
    Topology,
    free_port,
    init_process_group,
    topology_from_env,
    under_torchrun,
)
from gnnscale.host import meminfo

SETTLE_S = 1.0  # after a first failure, how long to collect the other ranks' reports
#: ... when every report so far is a deadline that fired: a rank still quiet may be waiting on
#: a deadline of its own (its sampler workers') and name the cause in a moment.
DEADLINE_SETTLE_S = 5.0
KILL_AFTER_S = 5.0  # how long a terminated process has to unwind before SIGKILL
#: the start-up deadline of :func:`spawn` when none is given (``dist.startup_timeout_s``'s
#: default): starting the ranks and their rendezvous, before the run's deadline arms
STARTUP_TIMEOUT_S = 600.0
#: a test's hook: ``"<rank>:<seconds>[,...]"`` makes those ranks sleep so long in start-up
#: (before they join the process group), a slow start simulated for real
START_DELAY_ENV = "GNNSCALE_TEST_START_DELAY"
#: the launcher's own start-up deadline is ``dist.startup_timeout_s`` and this many seconds
#: more, once every rank's process runs: a backstop for a start-up no peer times out on
STARTUP_SLACK_S = 10.0
_UP = "up"  # a rank's message to the launcher once it has joined the process group
#: What the fork server imports once for every rank it starts (torch, PyG, all of gnnscale),
#: after its own exit duty (:mod:`gnnscale.distributed.fork_server`).
PRELOAD = ["gnnscale.distributed.fork_server", "gnnscale.runner.worker"]
START_METHODS = ("forkserver", "spawn")


def rank_context() -> Any:
    """The multiprocessing context ranks start from: a fork server with :data:`PRELOAD`
    (started here if it is not running yet), or ``spawn`` where there is none or
    ``GNNSCALE_START_METHOD=spawn`` asks for it."""
    method = os.environ.get("GNNSCALE_START_METHOD", "forkserver")
    if method not in START_METHODS:
        raise ValueError(f"GNNSCALE_START_METHOD must be one of {START_METHODS}, got {method!r}")
    if method == "spawn" or "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    with temp_dir_as(run_temp_dir()):  # the server's socket folder: not in a shorter-lived one
        socket_dir()  # its socket path fits AF_UNIX (the ranks inherit the folder too)
        with sigint_blocked():  # Ctrl-C reaches the launcher, not the server's imports
            forkserver.ensure_running()
    return ctx


class RankFailed(RuntimeError):
    """A rank raised or died; the message names it and carries its traceback."""


def stop_processes(procs: list, grace_s: float = 0.0) -> None:
    """Give ``procs`` ``grace_s`` seconds to exit, then terminate, then kill what remains.

    A stopped process (SIGSTOP) gets no grace: it is sent SIGTERM and continued, so it
    unwinds (its sampler workers stopped) instead of waiting, stopped, for SIGKILL."""
    procs = [p for p in procs if p.pid is not None]  # never started
    end = time.monotonic() + grace_s
    for p in procs:
        if not is_stopped(p.pid):
            p.join(timeout=max(0.0, end - time.monotonic()))
    for p in procs:  # all at once: one unwinding may wait on another (a process group)
        if p.is_alive():
            p.terminate()
            if is_stopped(p.pid):
                try:
                    os.kill(p.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
    end = time.monotonic() + KILL_AFTER_S
    for p in procs:
        p.join(timeout=max(0.0, end - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(timeout=2)


def use_temp_dir(path: str | None) -> None:
    """Send this process's temp files (``tempfile``, ``$TMPDIR``) to ``path`` (None: unset)."""
    if path is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = path
    tempfile.tempdir = path


@contextmanager
def temp_dir_as(path: str) -> Iterator[str]:
    """While inside, this process's temp files go to ``path``; the previous setting after."""
    before_env, before = os.environ.get("TMPDIR"), tempfile.tempdir
    use_temp_dir(path)
    try:
        yield path
    finally:
        tempfile.tempdir = before
        if before_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before_env


@contextmanager
def private_temp_dir(prefix: str = "gnnscale-") -> Iterator[str]:
    """While inside, temp files (e.g. PyG's generated modules) go to a new folder, inside this
    process's :func:`run_temp_dir`, that is removed on the way out."""
    path = tempfile.mkdtemp(prefix=prefix, dir=run_temp_dir())
    try:
        with temp_dir_as(path):
            yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _leave_fork_server() -> None:
    """In a rank forked by the fork server: close the server's "alive" pipe it inherits, so
    the server ends with its launcher rather than with its last rank (on its way out it
    continues stopped ranks, :mod:`gnnscale.distributed.fork_server`); a rank starts no rank."""
    server = forkserver._forkserver
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None and getattr(server, "_forkserver_pid", None) is None:
        try:
            os.close(fd)
        except OSError:
            pass
        server._forkserver_alive_fd = None


def start_delay(rank: int, env: dict | None = None) -> float:
    """Seconds ``rank`` sleeps in start-up by :data:`START_DELAY_ENV` (tests only; 0 unset)."""
    spec = (os.environ if env is None else env).get(START_DELAY_ENV, "")
    for item in filter(None, (part.strip() for part in spec.split(","))):
        who, _, seconds = item.partition(":")
        if who.strip() == str(rank):
            return float(seconds)
    return 0.0


def _worker(rank, world_size, fn, args, port, backend, device, timeout_s, results, threads,
            launcher_pid, tmp_dir, env, cores=None, startup_timeout_s=None):
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the launcher stops the ranks
        _leave_fork_server()
        # the parent is the launcher (spawn) or the fork server, which ends with the launcher
        guard_rank(os.getppid(), launcher_pid=launcher_pid)
        os.environ.clear()
        os.environ.update(env)  # the launcher's, not the fork server's (started earlier)
        use_temp_dir(tmp_dir)
        if cores:  # before torch starts its intra-op threads: they inherit the binding
            bind_rank(rank, threads, cores)
        torch.set_num_threads(threads)
        delay = start_delay(rank)
        if delay:
            time.sleep(delay)
        topo = init_process_group(rank, world_size, backend=backend, device=device, port=port,
                                  timeout_s=timeout_s, startup_timeout_s=startup_timeout_s)
        results.put((rank, _UP, b""))
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


def describe_exit(code: int | None) -> str:
    """``killed by signal SIGKILL`` / ``exit code 1`` for a process exit code."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def fork_server_death() -> str | None:
    """How this process's fork server ended (``killed by signal SIGKILL``) when it is dead,
    else None. A rank it started then reads as "exit code 255" (its parent could not tell);
    the dead server is reaped here and forgotten, so the next launch starts a new one (as
    ``forkserver.ensure_running`` does when it finds it dead)."""
    server = forkserver._forkserver
    pid = getattr(server, "_forkserver_pid", None)
    if pid is None:
        return None
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    if not done:
        return None
    death = f"the fork server that started the ranks (pid {pid}) " + (
        "was " if os.WIFSIGNALED(status) else "ended with ") + describe_exit(
        os.waitstatus_to_exitcode(status))
    with server._lock:  # as ensure_running does on finding it dead
        os.close(server._forkserver_alive_fd)
        server._forkserver_address = server._forkserver_alive_fd = None
        server._forkserver_pid = None
    return death


def _dead_fork_server(wait_s: float = 2.0) -> str | None:
    """:func:`fork_server_death`, given ``wait_s`` seconds to see a server that is dying (its
    socket closed before the kernel made it a zombie); None when it still runs."""
    end = time.monotonic() + wait_s
    while True:
        death = fork_server_death()
        if death is not None or time.monotonic() >= end:
            return death
        time.sleep(0.05)


#: What a rank reports when its fork server died under it: its death signal, or a peer that
#: went first (a process group still connecting).
PEER_GONE = ("Terminated: stopped by", "Connection closed by peer", "Connection reset by peer")

NO_REPORT = ("(no traceback: the rank never raised, the launcher ended it; to see where a "
             "rank hangs, look at it while it does, e.g. py-spy dump --pid PID)")
NO_TRACEBACK = (
    "(no traceback reached the launcher: the rank ended before its worker could report, e.g. "
    "killed, out of memory, or a launching script without an `if __name__ == \"__main__\":` "
    "guard that re-ran when the rank imported it; the rank's own output, above, says which)")


#: How a peer's failure reads when a rank stopped answering: its collective (gloo, nccl's
#: watchdog) or a store wait ran past the deadline.
TIMED_OUT = re.compile(r"timed out|timeout(?!_s)|timing out", re.IGNORECASE)


def _timed_out(tb: str) -> bool:
    """Whether a rank's formatted traceback is a deadline that fired (its exception lines, the
    unindented ones, say so: not a source line that merely mentions a timeout)."""
    return any(TIMED_OUT.search(line) for line in tb.splitlines() if not line.startswith(" "))


def _error_line(tb: list[str]) -> str:
    """The exception line of a formatted traceback (torch may append ``At:`` frames)."""
    lines = [line for line in tb if line.strip()]
    if "At:" in lines:
        at = len(lines) - 1 - lines[::-1].index("At:")
        if all(line.startswith(" ") for line in lines[at + 1:]):
            lines = lines[:at] or lines
    return lines[-1]


class _Failures:
    """What went wrong, in the order the launcher saw it."""

    def __init__(self, procs: list, timeout_s: float | None = None,
                 startup_timeout_s: float | None = None) -> None:
        self.procs = procs
        self.timeout_s = timeout_s
        self.startup_timeout_s = startup_timeout_s
        self.up: set[int] = set()  # ranks that joined the process group
        self.late: list[int] = []  # ranks the launcher's own start-up deadline found starting
        self.reports: dict[int, str] = {}  # rank -> traceback, arrival order
        self.silent: list[int] = []  # ranks seen dead before any report of theirs
        self.since: float | None = None
        self.memory = _MemoryWatch(procs)

    def scan(self, done: dict) -> None:
        self.memory.sample()
        for r, p in enumerate(self.procs):
            if (p.exitcode not in (None, 0) and r not in self.silent and r not in self.reports
                    and r not in done):
                self.silent.append(r)
                self.since = self.since or time.monotonic()

    def overdue(self, started: float, done: dict) -> None:
        """Past the start-up deadline and :data:`STARTUP_SLACK_S` more (the peers' time to
        time out and report it): the ranks still starting, when no peer named them (every
        rank starting, say)."""
        if self.since is not None or self.startup_timeout_s is None or \
                time.monotonic() < started + self.startup_timeout_s + STARTUP_SLACK_S:
            return
        self.late = [r for r in self._quiet(done) if r not in self.up]
        if self.late:
            self.since = time.monotonic()

    def report(self, rank: int, tb: str, done: dict) -> None:
        self.scan(done)  # a rank already dead without a report died before this failure
        self.reports[rank] = tb
        self.since = self.since or time.monotonic()

    def _quiet(self, done: dict) -> list[int]:
        """Ranks still running that have neither reported nor finished."""
        return [r for r, p in enumerate(self.procs)
                if r not in done and r not in self.reports and p.exitcode is None]

    def settled(self, done: dict) -> bool:
        if self.since is None:
            return False
        pending = [r for r in self._quiet(done) if not is_stopped(self.procs[r].pid)]
        deadlines = self.reports and all(_timed_out(tb) for tb in self.reports.values())
        window = DEADLINE_SETTLE_S if deadlines and not self.silent else SETTLE_S
        return not pending or time.monotonic() - self.since > window

    def _unanswering(self, done: dict) -> list[int]:
        """When every report is a deadline that fired: the ranks still running that did not
        time out themselves, stopped ones (SIGSTOP, a debugger) first."""
        if not self.reports or not all(_timed_out(tb) for tb in self.reports.values()):
            return []
        quiet = self._quiet(done)
        return sorted(quiet, key=lambda r: not is_stopped(self.procs[r].pid))

    def _state(self, rank: int, where: str = "not in the collective") -> str:
        pid = self.procs[rank].pid
        state = process_state(pid)
        if state in ("T", "t"):
            return (f"its process (pid {pid}) is stopped (state {state}: SIGSTOP, SIGTSTP or "
                    "a debugger)")
        return f"its process (pid {pid}) still runs (state {state}) but {where}"

    def message(self, done: dict) -> str:
        """Who failed first, with its traceback, then the others' last lines; call it before
        the ranks are stopped (it reads the state of those that still run)."""
        silent = [r for r in self.silent if r not in self.reports]
        server = fork_server_death()  # a dead server is the cause, whether its ranks have
        # ended already (exit code 255) or are still reporting the death signal it sent them
        if server is None and any(sign in tb for tb in self.reports.values()
                                  for sign in PEER_GONE):
            for _ in range(10):  # a rank was signalled or lost a peer: a server dying now is
                time.sleep(0.05)  # reaped within milliseconds (its ranks heard of it first)
                server = fork_server_death()
                if server:
                    break
        if server:  # every rank it started reads "exit code 255": say what happened
            self.silent = [r for r in self.silent if self.procs[r].exitcode != 255]
            silent = [r for r in silent if self.procs[r].exitcode != 255]
        unanswering = [] if silent else self.late or self._unanswering(done)
        if unanswering:
            starting = [r for r in unanswering if r not in self.up]
            first = starting[0] if starting else unanswering[0]
            if starting:  # its peers' rendezvous waited for it under the start-up deadline
                deadline = (f"dist.startup_timeout_s={self.startup_timeout_s:g}s"
                            if self.startup_timeout_s else "their start-up deadline")
                state = self._state(first, "in its start-up")
                why = "the launcher waited for it" if self.late else \
                    "its peers' rendezvous timed out waiting for it"
                lines = [f"rank {first} did not finish starting: {state}; {why} ({deadline})",
                         NO_REPORT]
            else:
                deadline = (f"dist.timeout_s={self.timeout_s:g}s" if self.timeout_s
                            else "their deadline")
                lines = [f"rank {first} stopped answering: {self._state(first)}; its peers' "
                         f"collectives timed out waiting for it ({deadline})", NO_REPORT]
        else:  # a report that is not a deadline comes before the peers' timeouts it caused
            own = [r for r, tb in self.reports.items() if not _timed_out(tb)]
            first = silent[0] if silent else own[0] if own else next(iter(self.reports), 0)
            lines = [f"rank {first} failed first ({self._exit(first, server)})"]
            held = self.memory.why_killed(first) \
                if self.procs[first].exitcode == -signal.SIGKILL else ""
            if held:
                lines.append(held)
            lines.append(self.reports.get(first, NO_TRACEBACK).rstrip())
        others = [r for r in [*self.reports, *silent, *unanswering] if r != first]
        if others:
            lines.append("then, as a consequence:")
        for r in others:
            tb = self.reports.get(r, "").strip().splitlines()
            last = (_error_line(tb) if tb else f"no report, {self._state(r)}" if r in unanswering
                    else self._exit(r, server))
            lines.append(f"  rank {r}: {last}")
        if server:
            lines.insert(0, f"{server}; the ranks it started end with it")
        return "\n".join(lines)

    def _exit(self, rank: int, server: str | None) -> str:
        """How ``rank``'s process ended, as far as the launcher can tell."""
        code = self.procs[rank].exitcode
        if code == 255 and server:
            return "ended with the fork server, its exit status unknown"
        return describe_exit(code)


#: the host's available memory under which a SIGKILLed rank is said to be the kernel's
#: out-of-memory killer's (a share of the host's memory)
OOM_AVAILABLE_SHARE = 0.1


class _MemoryWatch:
    """Each rank's largest resident memory and the host's least available memory, as the
    launcher samples them while it waits (Linux ``/proc``): what a SIGKILLed rank held."""

    def __init__(self, procs: list) -> None:
        self.procs = procs
        self.peak: dict[int, int] = {}
        self.total: int | None = None
        self.least: int | None = None

    def sample(self) -> None:
        """One sample of every running rank and of the host."""
        for r, p in enumerate(self.procs):
            if p.pid is not None and p.exitcode is None:
                rss = resident_bytes(p.pid)
                if rss is not None:
                    self.peak[r] = max(rss, self.peak.get(r, 0))
        host = meminfo("MemTotal", "MemAvailable")
        if len(host) == 2:
            self.total = host["MemTotal"]
            avail = host["MemAvailable"]
            self.least = avail if self.least is None else min(self.least, avail)

    def why_killed(self, rank: int) -> str:
        """``it held up to 11.3 GiB resident, ...``: what ``rank`` held before SIGKILL and
        whether the host ran out of memory then (the kernel's OOM killer sends SIGKILL); empty
        when the launcher saw it run too briefly to sample it."""
        if rank not in self.peak:
            return ""
        gib = 2.0 ** 30
        line = f"it held up to {self.peak[rank] / gib:.1f} GiB resident"
        if self.total is None or self.least is None:
            return line
        line += (f", the host's available memory fell to {self.least / gib:.1f} of "
                 f"{self.total / gib:.1f} GiB")
        if self.least < OOM_AVAILABLE_SHARE * self.total:
            line += (": most likely the kernel's out-of-memory killer, the run as configured "
                     "needing more memory than this host has (docs/choosing-a-strategy.md: "
                     "strategies that keep less per rank)")
        return line


def _start_ranks(procs: list, tmp_dir: str) -> str | None:
    """Starts the ranks' processes with ``TMPDIR`` set to ``tmp_dir`` (restored after); the
    failure message when the fork server died while they started, else None."""
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = tmp_dir  # ranks inherit it: their imports write there too
    try:
        for p in procs:
            p.start()
    except (EOFError, OSError):  # the fork server died as it was asked for a rank
        death = _dead_fork_server()
        if death is None:
            raise
        started = sum(p.pid is not None for p in procs)
        return (f"{death} while the ranks were starting ({started} of {len(procs)} "
                "started, and stopped): run again, a new fork server starts")
    finally:
        if before is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before
    return None


def _collect(results: Any, failures: _Failures, outs: dict[int, Any], world_size: int) -> None:
    """Reads the ranks' answers into ``outs`` (rank -> result) until every rank answered or
    ``failures`` has settled; between answers it watches for dead, stopped or overdue ranks."""
    running_since = time.monotonic()  # every rank's process is running
    while len(outs) < world_size and not failures.settled(outs):
        try:
            rank, ok, payload = results.get(timeout=0.2)
        except queue.Empty:
            failures.scan(outs)
            failures.overdue(running_since, outs)
            continue
        if ok == _UP:
            failures.up.add(rank)
        elif ok:
            outs[rank] = pickle.loads(payload)
        else:
            failures.report(rank, payload, outs)


def spawn(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    backend: str = "gloo",
    device: str = "cpu",
    timeout_s: float = 120.0,
    grace_s: float = 10.0,
    threads_per_rank: int | None = None,
    cores: list[int] | str | None = None,
    startup_timeout_s: float | None = None,
) -> list[Any]:
    """Run ``fn(topology, *args)`` on ``world_size`` local ranks; return results in rank order.

    ``fn`` must be importable (module level). Raises :class:`RankFailed` naming the rank that
    failed first (or, when its peers' collectives ran past ``timeout_s``, the rank that stopped
    answering; when their rendezvous ran past ``startup_timeout_s``, the rank that did not
    finish starting); the other ranks are terminated after ``grace_s`` seconds, a stopped one
    at once. ``startup_timeout_s`` (None: :data:`STARTUP_TIMEOUT_S`) bounds starting the ranks
    and their rendezvous; ``timeout_s`` arms once every rank has joined.
    ``cores``: bind rank ``r`` to its block of them (:func:`~gnnscale.distributed.threads.
    rank_cores`); ``"auto"``: the cores the launcher would bind them to
    (:func:`~gnnscale.distributed.threads.binding`); None leaves the ranks unbound.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if startup_timeout_s is None:
        startup_timeout_s = STARTUP_TIMEOUT_S
    ctx = rank_context()
    results = ctx.Queue()
    port = free_port()
    threads = threads_per_rank or max(1, (os.cpu_count() or 1) // world_size)
    if cores == "auto":
        cores = binding(world_size, threads)
    tmp_dir = tempfile.mkdtemp(prefix="gnnscale-ranks-", dir=run_temp_dir())
    # not daemonic: a rank may start processes of its own (sampler workers); ranks end with
    # the launcher (guard_rank) and the ``finally`` below terminates them however spawn ends
    # every listener of the ranks on loopback (gloo's pairs, NCCL's bootstrap), as the store
    env = {**os.environ, "TMPDIR": tmp_dir, **listener_env()}
    procs = [
        ctx.Process(target=_worker, args=(r, world_size, fn, args, port, backend, device,
                                          timeout_s, results, threads, os.getpid(), tmp_dir,
                                          env, cores, startup_timeout_s),
                    daemon=False, name=f"gnnscale-rank-{r}")
        for r in range(world_size)
    ]
    outs: dict[int, Any] = {}
    failures = _Failures(procs, timeout_s, startup_timeout_s)
    message = None
    with launcher_signals():  # around the clean-up too: a second Ctrl-C cannot cut it short
        try:
            message = _start_ranks(procs, tmp_dir)
            if message is None:
                _collect(results, failures, outs, world_size)
            if failures.since is not None and message is None:
                message = failures.message(outs)  # while the ranks still run as they stopped
        except Terminated as err:
            print(f"gnnscale: launcher {err}; stopping the ranks", file=sys.stderr, flush=True)
            raise
        finally:
            stop_processes(procs, grace_s if failures.since is not None else 0.0)
            shutil.rmtree(tmp_dir, ignore_errors=True)
    if message is not None:
        raise RankFailed(message)
    return [outs[r] for r in range(world_size)]
