"""No orphaned ranks: a rank ends within seconds of its launcher's death, however it died, and
no temp folder outlives the process that made it for longer than the next run's start.

On Linux the kernel sends the rank SIGTERM when its parent dies (``PR_SET_PDEATHSIG``); a
watchdog thread that polls the parent pid is the fallback everywhere. SIGTERM raises
:class:`Terminated` in the rank's main thread, so ``finally`` blocks run (sampler workers are
stopped, the process group destroyed); a rank stuck in native code is ended after a grace
period, by a timer whose signal the kernel acts on even when no Python code can run. The
launcher turns SIGTERM/SIGHUP into :class:`Terminated` too, stops its ranks and exits
non-zero; so does SIGINT (Ctrl-C), in one line, which the ranks themselves ignore (the launcher
stops them).

A launching process keeps its temp files (its ranks', PyG's generated modules, the fork
server's socket) in one private folder, :func:`run_temp_dir`, removed at its exit; a folder
whose process was killed is removed by the next one that starts.

Sockets: multiprocessing's AF_UNIX sockets (the fork server's, the resource sharer that passes
shared tensors between a rank and its sampler workers) go to :func:`socket_dir`, a folder whose
path leaves room for a socket name within the 107-byte AF_UNIX limit however deep the temp
folder is: the temp folder itself when it is short enough, else a private folder in ``/tmp``
(or ``/var/tmp``, ``/dev/shm``); with none of those usable the launcher refuses to start.
Processes started afterwards (ranks, sampler workers) inherit it.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing import process, util

from gnnscale.errors import UserError

PR_SET_PDEATHSIG = 1
POLL_S = 0.2


class Terminated(SystemExit):
    """This process was asked to stop by a signal; exit status 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum

    def __str__(self) -> str:
        return f"stopped by {signal.Signals(self.signum).name}"


_stopping: list[float] = []  # when this process began to stop (rank side)
_grace: list[float] = []  # the rank's grace period, once guarded


def _arm_hard_exit() -> None:
    """End this rank ``grace_s`` after it began to stop, by the kernel (SIGALRM's default
    action), even when its main thread is stuck in native code holding the GIL (a process
    group's destructor joining a thread that waits for the GIL, say), where neither the
    watchdog thread nor any Python handler could run again."""
    if _grace:
        signal.setitimer(signal.ITIMER_REAL, _grace[0])


def _raise_terminated(signum: int, _frame: object) -> None:
    if _stopping:
        return  # already unwinding: let the finally blocks finish
    _stopping.append(time.monotonic())
    _arm_hard_exit()
    raise Terminated(signum)


def set_parent_death_signal(signum: int) -> bool:
    """Ask the kernel to send this process ``signum`` when the thread that started it ends
    (``PR_SET_PDEATHSIG``, Linux); False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def children(parent: int | None = None) -> list[int]:
    """The pids of ``parent``'s (this process's) children, from Linux ``/proc``; [] elsewhere."""
    me = str(os.getpid() if parent is None else parent)
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    found = []
    for pid in filter(str.isdigit, entries):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[1] == me:
                    found.append(int(pid))
        except (OSError, IndexError, ValueError):
            continue
    return found


def _kill_children() -> None:
    """SIGKILL this process's children (Linux ``/proc``), so a hard exit orphans nobody."""
    for pid in children():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue


def process_state(pid: int | None) -> str | None:
    """``pid``'s state letter from ``/proc`` (``R`` running, ``S`` sleeping, ``T`` stopped,
    ``t`` stopped by a debugger, ``Z`` zombie, ...); None when it is gone or unknown."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def resident_bytes(pid: int | None) -> int | None:
    """``pid``'s resident memory (``VmRSS`` in ``/proc``), None when it is gone or unknown."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def is_stopped(pid: int | None) -> bool:
    """Whether ``pid`` is stopped (SIGSTOP, SIGTSTP, a debugger): it runs no code, answers no
    peer and acts on no signal but SIGKILL until it is continued."""
    return process_state(pid) in ("T", "t")


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    except OSError:  # no /proc (macOS): a signal 0 tells whether it exists at all
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _watch(parent_pid: int, grace_s: float, launcher_pid: int | None) -> None:
    orphaned_at = None
    while True:
        time.sleep(POLL_S)
        gone = os.getppid() != parent_pid or (launcher_pid is not None
                                               and not _alive(launcher_pid))
        if orphaned_at is None and gone:
            orphaned_at = time.monotonic()
            _arm_hard_exit()
            os.kill(os.getpid(), signal.SIGTERM)  # the fallback when no death signal came
        began = min([*_stopping, *([orphaned_at] if orphaned_at else [])], default=None)
        if began is not None and time.monotonic() - began > grace_s:
            _kill_children()
            os._exit(128 + signal.SIGTERM)  # stuck in native code: end without unwinding


def guard_rank(parent_pid: int, grace_s: float = 5.0, launcher_pid: int | None = None) -> None:
    """Tie this rank's life to ``parent_pid`` and, when given, to ``launcher_pid`` (a rank
    started by a fork server has the server as its parent); call first thing in the rank's
    main thread."""
    _stopping.clear()
    _grace[:] = [grace_s]
    signal.signal(signal.SIGALRM, signal.SIG_DFL)  # the hard exit (_arm_hard_exit)
    signal.signal(signal.SIGTERM, _raise_terminated)
    set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent_pid or (launcher_pid is not None and not _alive(launcher_pid)):
        raise Terminated(signal.SIGTERM)  # the launcher died before the death signal was set
    threading.Thread(target=_watch, args=(parent_pid, grace_s, launcher_pid),
                     name="gnnscale-parent-watch", daemon=True).start()


@contextmanager
def launcher_signals() -> Iterator[None]:
    """While inside, SIGTERM, SIGHUP and SIGINT (Ctrl-C) raise :class:`Terminated` (main
    thread only), once: a second one while the ranks are being stopped is ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signums = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    previous = {s: signal.getsignal(s) for s in signums}
    raised: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        if not raised:
            raised.append(signum)
            raise Terminated(signum)

    for s in signums:
        signal.signal(s, stop)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """While inside, SIGINT is blocked in this thread: a helper process started here (a fork
    server, sampler workers) inherits the blocked signal, so a Ctrl-C to the process group
    never interrupts it mid-import (its owner stops it); a SIGINT that came meanwhile reaches
    this thread on the way out (as multiprocessing starts its resource tracker)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


# -- temp folders -----------------------------------------------------------------------------
RUN_TEMP_PREFIX = "gnnscale-run-"
_RUN_TEMP = re.compile(re.escape(RUN_TEMP_PREFIX) + r"(\d+)-")
_LOCK = ".owner.lock"  # held (flock) by the owning process while it lives
_ALSO = ".also-remove"  # folders elsewhere the owner made before its own (multiprocessing's)
_run_temp: dict[int, tuple[str, int]] = {}  # pid -> (folder, lock fd)


def _owner_gone(path: str, pid: int) -> bool:
    """True when ``pid`` is not alive and nothing holds the folder's lock (a process of the
    same pid in another pid namespace would hold it)."""
    if _alive(pid):
        return False
    try:
        fd = os.open(os.path.join(path, _LOCK), os.O_RDONLY)
    except FileNotFoundError:
        return True  # killed between creating the folder and its lock
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def remove_stale_temp_dirs(parent: str | None = None) -> list[str]:
    """Remove the :func:`run_temp_dir` folders in ``parent`` (the temp folder) whose owner
    process is gone, with the folders they recorded as theirs; returns what was removed.

    Only this user's folders named ``gnnscale-run-<pid>-*`` whose pid is not alive and whose
    lock nobody holds are touched."""
    parent = parent or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    for name in names:
        m = _RUN_TEMP.match(name)
        path = os.path.join(parent, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not m or not os.path.isdir(path) or os.path.islink(path) or st.st_uid != os.getuid():
            continue
        if not _owner_gone(path, int(m.group(1))):
            continue
        for other in _recorded(path, parent):
            shutil.rmtree(other, ignore_errors=True)
            removed.append(other)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _recorded(path: str, parent: str) -> list[str]:
    """The folders ``path`` recorded as its owner's: only multiprocessing's (``pymp-*``),
    only beside it."""
    try:
        with open(os.path.join(path, _ALSO)) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    return [p for p in lines if os.path.dirname(p) == parent
            and os.path.basename(p).startswith("pymp-") and os.path.isdir(p)]


def run_temp_dir() -> str:
    """This process's private temp folder, ``<temp folder>/gnnscale-run-<pid>-*``: made on the
    first call, it becomes the process's ``$TMPDIR`` and ``tempfile.tempdir`` (so what the
    process and its ranks write there -- PyG's generated modules, the ranks' folders, the fork
    server's socket -- lands in it) and is removed at exit; stale ones of processes that are
    gone (SIGKILLed) are removed first."""
    pid = os.getpid()
    if pid in _run_temp:
        return _run_temp[pid][0]
    parent = tempfile.gettempdir()
    for folder in dict.fromkeys([parent, *SHORT_BASES]):  # short ones: killed socket folders
        remove_stale_temp_dirs(folder)
    path, fd = _owned_dir(parent)
    mp_temp = getattr(process.current_process(), "_config", {}).get("tempdir")
    if mp_temp and os.path.dirname(mp_temp) == parent:  # made before this folder: record it
        with open(os.path.join(path, _ALSO), "a") as f:
            f.write(f"{mp_temp}\n")
    _run_temp[pid] = (path, fd)
    os.environ["TMPDIR"] = path
    tempfile.tempdir = path
    # after multiprocessing's own exit clean-up (its folder may be in this one: priority -100)
    util.Finalize(None, _remove_run_temp, args=(pid,), exitpriority=-200)
    return path


def _owned_dir(parent: str) -> tuple[str, int]:
    """A new ``gnnscale-run-<pid>-*`` folder in ``parent`` and the fd of its lock, held (flock)
    while this process lives: :func:`remove_stale_temp_dirs` removes it once it is gone."""
    path = tempfile.mkdtemp(prefix=f"{RUN_TEMP_PREFIX}{os.getpid()}-", dir=parent)
    fd = os.open(os.path.join(path, _LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel however this process ends
    return path, fd


def _remove_run_temp(pid: int) -> None:
    if os.getpid() != pid or pid not in _run_temp:
        return
    path, fd = _run_temp.pop(pid)
    shutil.rmtree(path, ignore_errors=True)
    os.close(fd)


# -- socket paths -----------------------------------------------------------------------------
#: The longest AF_UNIX socket path, in bytes (``sun_path`` less its NUL): 107 on Linux.
SUN_PATH_MAX = 107 if sys.platform.startswith("linux") else 103
#: What multiprocessing adds to its temp folder for a socket: ``/listener-XXXXXXXX``.
SOCKET_NAME_LEN = len("/listener-") + 8
#: Short folders a socket folder falls back to when the temp folder's path is too long.
SHORT_BASES = ("/tmp", "/var/tmp", "/dev/shm")
_PYMP_LEN = len("/pymp-") + 8  # multiprocessing's own temp folder, made in the temp folder
_OWNED_LEN = len("/" + RUN_TEMP_PREFIX) + 7 + 1 + 8  # an _owned_dir folder (pid <= 7 digits)


class SocketPathError(UserError):
    """No folder leaves room for an AF_UNIX socket path (the temp folder's path is too long)."""


def socket_room(folder: str) -> bool:
    """Whether a multiprocessing socket in ``folder`` stays within :data:`SUN_PATH_MAX`."""
    return len(os.fsencode(folder)) + SOCKET_NAME_LEN <= SUN_PATH_MAX


def _usable(folder: str) -> bool:
    return os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK)


def socket_dir() -> str:
    """The folder of this process's multiprocessing sockets (``util.get_temp_dir()``: the fork
    server's, the resource sharer's), with room for a socket name; processes started after
    this call inherit it.

    Multiprocessing's own folder (``pymp-*`` in the temp folder) when that is short enough,
    else a private folder in one of :data:`SHORT_BASES`, removed at this process's exit (or by
    the next run after a SIGKILL). Raises :class:`SocketPathError` when no folder fits."""
    config = process.current_process()._config
    current = config.get("tempdir")
    if current and socket_room(current) and os.path.isdir(current):
        return current
    temp = tempfile.gettempdir()
    if not current and socket_room(temp + "/" + "x" * (_PYMP_LEN - 1)):
        return _own_pymp(temp)  # its own, removed at exit by multiprocessing
    pid = os.getpid()
    for base in SHORT_BASES:
        if _usable(base) and socket_room(base + "x" * _OWNED_LEN):
            path, fd = _owned_dir(base)
            config["tempdir"] = path
            util.Finalize(None, _remove_socket_dir, args=(pid, path, fd), exitpriority=-100)
            return path
    raise SocketPathError(
        f"the temp folder {temp} is too long for the run's AF_UNIX sockets ({len(temp)} "
        f"bytes; a socket path holds at most {SUN_PATH_MAX}) and none of "
        f"{', '.join(SHORT_BASES)} is a writable folder to use instead: set TMPDIR to a "
        "shorter folder")


def _own_pymp(parent: str) -> str:
    """Multiprocessing's own temp folder (``util.get_temp_dir()``: ``pymp-*`` in ``parent``,
    removed at exit by multiprocessing), made as it makes it, but with its name recorded in
    this process's :func:`run_temp_dir` first, when there is one beside it: a process
    SIGKILLed at any moment leaves no ``pymp-*`` that the next run does not remove."""
    owned = _run_temp.get(os.getpid())
    while True:
        path = os.path.join(parent, "pymp-" + next(tempfile._get_candidate_names()))
        if owned and os.path.dirname(owned[0]) == parent:
            with open(os.path.join(owned[0], _ALSO), "a") as f:
                f.write(f"{path}\n")
        try:
            os.mkdir(path, 0o700)
            break
        except FileExistsError:
            continue
    util.info("created temp directory %s", path)
    util.Finalize(None, util._remove_temp_dir, args=(shutil.rmtree, path), exitpriority=-100)
    process.current_process()._config["tempdir"] = path
    return path


def _remove_socket_dir(pid: int, path: str, fd: int) -> None:
    if os.getpid() != pid:
        return
    shutil.rmtree(path, ignore_errors=True)
    os.close(fd)
