"""Compose the real Hydra config (as train.py does) for tests, with a tmp run folder."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf, open_dict

from gnnscale import registry

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def make_cfg(tmp_path: Path, *overrides: str, run: str = "run") -> DictConfig:
    """The config ``train.py`` would compose for ``overrides``, writing under ``tmp_path``;
    ``epochs`` left to the strategy is 3 here, whatever the strategy (a test says how long it
    trains: a full-graph strategy's default is many more epochs)."""
    registry.load_all()
    with initialize_config_dir(str(CONFIGS), version_base=None):
        cfg = compose("config", overrides=list(overrides))
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / run)
        cfg.data_root = str(tmp_path / "data")
        cfg.progress = False
        if OmegaConf.is_interpolation(cfg, "epochs"):
            cfg.epochs = 3
    return cfg


TINY = ("dataset=synthetic", "dataset.preset=tiny", "model.hidden=32", "model.num_layers=2",
        "sampler.fanouts=[5,5]", "strategy.batch_size=128", "eval_batch_size=512", "logger=none")


def children() -> dict[int, list[int]]:
    """Every live process's children, by parent pid (from /proc)."""
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(entry.name))
        except (ValueError, OSError, IndexError):
            continue
    return kids


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``: children, theirs, and so on."""
    kids, out, todo = children(), [], [pid]
    while todo:
        for kid in kids.get(todo.pop(), []):
            out.append(kid)
            todo.append(kid)
    return out


def rank_pids(launcher: int) -> list[int]:
    """The ranks of a launcher: its spawned children, or the children of its fork server."""
    kids = children()

    def cmd(pid: int) -> str:
        return (Path(f"/proc/{pid}/cmdline").read_text()).replace("\0", " ")

    ranks = []
    for kid in kids.get(launcher, []):
        if "spawn_main" in cmd(kid):
            ranks.append(kid)
        elif "forkserver import main" in cmd(kid):
            ranks += kids.get(kid, [])
    return sorted(ranks)


def act_when_training(run_dir: Path, act: Callable[[list[int]], None],
                      deadline_s: float = 120) -> threading.Thread:
    """A thread that waits until the ranks of a run in this process write their first epoch,
    then calls ``act(ranks)`` with their pids (the children of this process's fork server):
    a test signals a rank while :func:`gnnscale.runner.run.run` trains in the main thread."""

    def watch() -> None:
        deadline = time.monotonic() + deadline_s
        while not (run_dir / "metrics.jsonl").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        act(rank_pids(os.getpid()))

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread
