"""Benchmark suites: each module ``<suite>.py`` defines ``run(quick: bool) -> dict``.

A suite returns ``{"config": ..., "results": ..., "ratios": ...}``; ``scripts/bench.py`` adds
``suite`` and ``env``, prints a table and writes the JSON (protocol in docs/benchmarks.md).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def suites() -> list[str]:
    """Names of the available suites."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def load(name: str):
    if name not in suites():
        raise SystemExit(f"unknown suite {name!r}; available: {', '.join(suites())}")
    return importlib.import_module(f"{__name__}.{name}")


def env() -> dict:
    """Machine facts recorded with every result."""
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "machine": platform.machine(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def compose_run(overrides: list[str], run_dir: str | Path, data_root: str | Path) -> Any:
    """The config ``train.py`` composes from ``overrides`` (every component registered), with
    the suite's run and data folders and progress bars off: one run of a suite."""
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    from gnnscale import registry

    registry.load_all()
    configs = Path(__file__).resolve().parents[1] / "configs"
    with initialize_config_dir(str(configs), version_base=None):
        cfg = compose("config", overrides=list(overrides))
    with open_dict(cfg):
        cfg.run_dir, cfg.data_root, cfg.progress = str(run_dir), str(data_root), False
    return cfg


def median_time(fn: Callable[[], object], repeats: int, warmup: int = 1) -> float:
    """Median wall time of ``fn`` over ``repeats`` calls after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def pyg_missing(what: str) -> str | None:
    """Why PyG's ``what`` (a loader that samples neighbours) cannot run here, or None: it
    needs pyg-lib or torch-sparse."""
    try:
        import torch_geometric.typing as t
    except ImportError:  # pragma: no cover
        return "torch_geometric is not installed"
    if t.WITH_PYG_LIB or t.WITH_TORCH_SPARSE:
        return None
    return f"PyG's {what} needs pyg-lib or torch-sparse (neither installed; `make sparse`)"


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b`` or None when either is missing."""
    if a is None or b is None or b == 0:
        return None
    return a / b
