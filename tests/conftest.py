"""Shared fixtures: copies of the real datasets in ../shared/datasets and a tiny synthetic graph.

The session's temp files (PyG's generated modules, multiprocessing's ``pymp-*``, torchrun's
``torchelastic_*``, those of every train.py it starts) go to a private folder removed at its
end, or by the next session when this one is killed; ``tmp_path`` stays where pytest keeps it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from gnnscale.data.graph import GraphStore
from gnnscale.distributed.guard import run_temp_dir


def pytest_configure(config: pytest.Config) -> None:
    """Point ``$TMPDIR`` (inherited by ranks and subprocesses) at the session's own folder."""
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())  # tmp_path's root
    run_temp_dir()


def shared_datasets_root() -> Path:
    """``$GNNSCALE_SHARED_DATASETS`` or ``<repo>/../shared/datasets``."""
    env = os.environ.get("GNNSCALE_SHARED_DATASETS")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "datasets"


@pytest.fixture
def shared_datasets(tmp_path: Path) -> Callable[[str], Path]:
    """``copy(sub)`` copies ``<shared datasets>/<sub>`` to ``tmp_path/<sub>`` and returns the
    copy; skips the test when that folder is absent (the real data is never committed)."""

    def copy(sub: str) -> Path:
        src = shared_datasets_root() / sub
        if not src.is_dir():
            pytest.skip(f"real dataset folder {src} is absent (see ../shared/datasets/README.md)")
        dest = tmp_path / sub
        shutil.copytree(src, dest, copy_function=shutil.copyfile)
        for p in [dest, *dest.rglob("*")]:  # the shared copy is read-only; the copy must not be
            p.chmod(0o755 if p.is_dir() else 0o644)
        return dest

    return copy


@pytest.fixture(scope="session")
def tiny_graph() -> GraphStore:
    """The ``tiny`` synthetic preset (2,000 nodes, 20,000 directed edges), seed 0."""
    from gnnscale.data.synthetic import generate

    return generate("tiny", seed=0)


@pytest.fixture
def one_thread() -> Iterator[None]:
    """The test on one intra-op thread, as each spawned rank on 2 cores runs: on tiny graphs a
    second thread only waits for the first, and on a loaded host each wait costs milliseconds
    (a tiny test, seconds). Tests of thread counts set their own."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def saved_tiny_graph(tmp_path_factory: pytest.TempPathFactory, tiny_graph: GraphStore
                     ) -> GraphStore:
    """The tiny graph saved and loaded back (memory-mapped, knows its processed folder)."""
    from gnnscale.data import processed

    folder = tmp_path_factory.mktemp("g") / "processed"
    processed.save(tiny_graph, folder)
    return processed.load(folder)
