"""Start the rank fork server early, before the launcher's own heavy imports, so that it
imports torch, PyG and gnnscale on the second core while the launcher composes and validates.

Torch-free on purpose: ``train.py`` calls :func:`warm_fork_server` first thing.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
from collections.abc import Sequence
from multiprocessing import forkserver

from gnnscale.distributed.threads import quiet_waits

#: The module every rank runs from; the fork server imports it (and through it every option
#: module) once, so a forked rank imports nothing.
WORKER_MODULE = "gnnscale.runner.worker"
#: Imported by the fork server before it: its duty on exit (stopped ranks are continued).
SERVER_MODULE = "gnnscale.distributed.fork_server"
_NO_RUN = {"--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "--version",
           "--shell-completion", "-sc"}


def needs_ranks(argv: Sequence[str], environ: dict | None = None) -> bool:
    """Whether a ``train.py`` command line will start rank processes: not for ``--help``-like
    flags, ``dist.world_size=1`` (trained in the launcher), torchrun (its own processes) or
    ``GNNSCALE_START_METHOD=spawn``."""
    env = os.environ if environ is None else environ
    if any(a in _NO_RUN or a.split("=")[0] in _NO_RUN for a in argv):
        return False
    if env.get("GNNSCALE_START_METHOD", "forkserver") != "forkserver" or "LOCAL_RANK" in env:
        return False
    worlds = [m.group(1) for a in argv if (m := re.fullmatch(r"\+*dist\.world_size=(.+)", a))]
    return not worlds or any(w.strip() != "1" for w in worlds[-1].split(","))


def warm_fork_server(argv: Sequence[str]) -> bool:
    """Start the fork server now when ``argv`` will start ranks; True when started."""
    if not needs_ranks(argv) or "forkserver" not in multiprocessing.get_all_start_methods():
        return False
    import tempfile

    from gnnscale.distributed.guard import (
        SocketPathError,
        run_temp_dir,
        sigint_blocked,
        socket_dir,
    )

    # this launcher's private folder first; then the server's socket folder (multiprocessing's
    # pymp-*, beside it in the temp folder), its name recorded in the private folder before it
    # is made: a launcher SIGKILLed at any moment (composing, validating, processing, before
    # any rank starts) has both removed by the next run, never a pymp-* left for good
    parent = tempfile.gettempdir()
    private = run_temp_dir()  # now this process's temp folder ($TMPDIR, tempfile's)
    tempfile.tempdir = parent  # for socket_dir alone (torch-free: not launch.temp_dir_as)
    try:
        socket_dir()  # the server's socket path must fit AF_UNIX
    except SocketPathError:
        return False  # the launcher refuses with the reason, before any rank starts
    finally:
        tempfile.tempdir = private
    quiet_waits()  # the server loads torch for every rank: its OpenMP wait policy first
    forkserver.set_forkserver_preload([SERVER_MODULE, WORKER_MODULE])  # launch.PRELOAD
    with sigint_blocked():  # a Ctrl-C now is the launcher's, not a traceback of the server's
        forkserver.ensure_running()
    return True


def stop_fork_server() -> None:
    """End the fork server now (at the launcher's exit) rather than when it next reads its
    pipe: one still importing when a configuration error ends the launcher would otherwise
    outlive it by a second or two."""
    pid = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass



def compose_once(argv: Sequence[str]) -> bool:
    """Have Hydra compose a single run's config once, not twice: before composing it for the
    run, ``hydra.main`` composes it a first time only to read ``hydra.mode`` (~0.3 s). Only
    where no config can set it: gnnscale's own configs never do (tests/runner/
    test_compose_once.py), so only for a command line of plain overrides over those alone (no
    flag such as ``-m``, ``--cfg`` or ``--config-dir``, no ``hydra.mode=``, no
    ``hydra.searchpath=`` naming a user's folder, no Hydra plugin that may add one): Hydra
    then runs it as it does when that first composition fails, as a single run. A user's
    folder whose config sets ``hydra.mode: MULTIRUN`` is left to Hydra: a sweep. True when
    done."""
    if any(a.startswith("-") or a.lstrip("+~").startswith(("hydra.mode", "hydra.searchpath"))
           for a in argv):
        return False
    if _hydra_plugins():
        return False  # a SearchPathPlugin may add a folder of configs that sets hydra.mode
    from hydra._internal.hydra import Hydra

    if not callable(getattr(Hydra, "get_mode", None)):
        return False

    def get_mode(self: Hydra, config_name: str | None, overrides: list[str]) -> None:
        return None  # Hydra's _run_app: run mode, with hydra.mode=RUN among the overrides

    Hydra.get_mode = get_mode  # type: ignore[method-assign]
    return True


def _hydra_plugins() -> bool:
    """Whether a Hydra plugin package is installed (the ``hydra_plugins`` namespace), whose
    search-path plugins Hydra consults on every compose."""
    import importlib.util

    try:
        return importlib.util.find_spec("hydra_plugins") is not None
    except (ImportError, ValueError):
        return True
