"""One run folder, one run: the launcher holds an exclusive ``flock`` on ``<run_dir>/.run.lock``
while its run trains, so a second run given the same folder is refused, naming the process
(pid and host) that holds it, instead of interleaving ``metrics.jsonl`` and overwriting the
checkpoint.

The kernel releases the lock when the holder dies, however it dies (a SIGKILLed launcher's
lock does not outlive it); a run that ends removes the file. A run that resumes in the folder
after the first ended takes the lock again. The lock is re-entrant within one process (a meta
strategy runs its concrete configs through :func:`gnnscale.runner.run.run` again).
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gnnscale.errors import ConfigError

#: The lock file's name inside the run folder (removed when the run ends).
LOCK_NAME = ".run.lock"

_held: dict[str, int] = {}  # run folder (real path) -> re-entry depth, in this process


def _holder(path: Path) -> str:
    """Who holds ``path``'s lock, as its holder wrote it (``process PID on HOST``)."""
    try:
        pid, _, host = path.read_text().strip().partition(" ")
    except OSError:
        pid, host = "", ""
    return f"process {pid} on {host}" if pid.isdigit() and host else "another process"


def _acquire(path: Path) -> int:
    """An open descriptor of ``path`` holding its exclusive lock (raises ConfigError when held
    elsewhere). Retries when the file was removed between opening and locking it."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConfigError(f"run folder {path.parent} is in use by {_holder(path)} (another "
                              "run trains there): wait for it to end, or give this run its own "
                              "folder (hydra.run.dir=...)") from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # its holder removed it as we opened it: lock the new one


@contextmanager
def run_folder_lock(run_dir: str | Path) -> Iterator[None]:
    """Hold ``run_dir``'s lock for the ``with`` block (``run_dir`` exists); refused with a
    :class:`ConfigError` naming the holder when another process holds it."""
    key = os.path.realpath(run_dir)
    if key in _held:
        _held[key] += 1
        try:
            yield
        finally:
            _held[key] -= 1
        return
    path = Path(run_dir) / LOCK_NAME
    fd = _acquire(path)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        _held[key] = 1
        yield
    finally:
        _held.pop(key, None)
        try:
            path.unlink()  # while still locked: a waiting run retries on the new file
        except FileNotFoundError:
            pass
        os.close(fd)


#: the folder of the run folder where Hydra's record of the run is kept
HYDRA_DIR = ".hydra"


def write_hydra_record(run_dir: str | Path, cfg: Any) -> None:
    """Write Hydra's record of this job (``.hydra/config.yaml``: ``cfg`` as composed,
    ``hydra.yaml``, ``overrides.yaml``: what Hydra itself writes when ``hydra.output_subdir``
    is set) into ``run_dir``; nothing outside a Hydra job, or when Hydra wrote it already.
    ``configs/config.yaml`` sets ``hydra.output_subdir: null`` so that Hydra writes nothing
    before the run folder's lock is held (:func:`locked`)."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf, open_dict

    from gnnscale.data.publish import write_text_atomic

    if not HydraConfig.initialized():
        return
    record = OmegaConf.create(OmegaConf.to_container(HydraConfig.instance().cfg,
                                                     resolve=False))
    if record.hydra.output_subdir is not None:  # the user set it: Hydra wrote it itself
        return
    with open_dict(record):
        record.hydra.output_subdir = HYDRA_DIR
    folder = Path(run_dir) / HYDRA_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for name, node in (("config.yaml", cfg), ("hydra.yaml", record),
                       ("overrides.yaml", record.hydra.overrides.task)):
        write_text_atomic(folder / name, OmegaConf.to_yaml(node))


def locked(train: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``train`` as ``train.py``'s task function runs it: the run folder's lock taken first
    (by the leader, as :func:`gnnscale.runner.run.run` takes it: re-entrant), then Hydra's
    record written (:func:`write_hydra_record`), then ``train(cfg)``; a run refused by the
    lock writes nothing into the folder of the run that holds it."""
    from gnnscale.distributed.schemas import under_torchrun

    def job(cfg: Any) -> Any:
        run_dir = Path(str(cfg.run_dir))
        if under_torchrun() and os.environ.get("RANK") != "0":  # rank 0 writes the record
            return train(cfg)
        run_dir.mkdir(parents=True, exist_ok=True)
        with run_folder_lock(run_dir):
            write_hydra_record(run_dir, cfg)
            return train(cfg)

    return job
