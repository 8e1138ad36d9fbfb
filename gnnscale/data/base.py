"""Dataset base class: produce a :class:`GraphStore` once, then memory-map the processed copy."""

from __future__ import annotations

import os
import shutil
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import numpy as np

from gnnscale.data import bounded, processed
from gnnscale.data.bounded import row_normalized
from gnnscale.data.checks import check_task
from gnnscale.data.graph import GraphStore
from gnnscale.data.metadata import FEATURES_PREFIX
from gnnscale.data.schemas import FeatureNorm, parse_budget, processed_dir
from gnnscale.errors import ConfigError


def normalize_features(graph: GraphStore, norm: str, done: frozenset[str] = frozenset()
                       ) -> GraphStore:
    """``graph`` with its features (``x``, or each type's) transformed by ``norm`` (recorded
    in ``graph.meta``); ``done``: arrays already transformed while they were written
    (:meth:`gnnscale.data.bounded.Stage.features`)."""
    graph.meta["feature_norm"] = norm
    if norm == "none":
        return graph
    if graph.x is not None and "x" not in done:
        graph.x = row_normalized(graph.x, norm, graph.name)
    graph.type_features = {t: f if f"{FEATURES_PREFIX}{t}" in done else
                           row_normalized(f, norm, f"{graph.name} ({t} nodes)")
                           for t, f in graph.type_features.items()}
    return graph


class Dataset(ABC):
    """A named graph source. Subclasses implement :meth:`process` (raw -> GraphStore).

    ``root`` holds ``<root>/<key>/processed``; :meth:`load` builds it on the first call (in one
    process: the runner loads before it spawns ranks) and memory-maps it afterwards. While
    :meth:`process` runs, :attr:`stage` is a staging folder where a loader may write its large
    arrays in chunks (:mod:`gnnscale.data.bounded`) instead of holding them in memory.
    """

    @property
    def streams(self) -> bool:
        """Whether :meth:`process` streams its source in chunks (:mod:`gnnscale.data.bounded`);
        a loader that does not reads it whole, refused under a smaller ``memory_budget``."""
        return False

    def __init__(self, root: str = "data", feature_norm: str = "none",
                 memory_budget: int | str | None = None) -> None:
        self.root = Path(os.path.expanduser(str(root)))
        self.feature_norm = FeatureNorm(feature_norm).value
        #: ``dataset.memory_budget`` in bytes (None: unbounded; :mod:`gnnscale.data.bounded`)
        self.memory_budget: int | None = parse_budget(memory_budget)
        #: the staging folder while :meth:`process` runs (None otherwise)
        self.stage: bounded.Stage | None = None

    @property
    @abstractmethod
    def key(self) -> str:
        """Folder name that identifies this dataset and every option that changes its content."""

    @abstractmethod
    def process(self) -> GraphStore:
        """Read raw files (or generate) and return the graph."""

    @property
    def processed_dir(self) -> Path:
        """``<root>/<key>[-<feature_norm>]/processed``: a transform is a different copy."""
        return processed_dir(self.root, self.key, self.feature_norm)

    @property
    def source(self) -> str:
        """What error messages about this dataset's content name (a file, or the key)."""
        return f"dataset {self.key}"

    def beside(self) -> dict[str, np.ndarray]:
        """Arrays kept beside the processed graph, verified with it (after :meth:`process`):
        a graph read from the user's tables keeps its id map there
        (:meth:`gnnscale.data.idmap.IdMap.files`); none by default."""
        return {}

    def check(self, graph: GraphStore) -> None:
        """Checks on a freshly processed graph (see :mod:`gnnscale.data.checks`)."""
        check_task(graph, self.source)

    def whole_bytes(self) -> int | None:
        """Bytes of the source that :meth:`process` reads whole (None: not known before it
        runs; a loader that :attr:`streams` reads nothing whole)."""
        return None

    def check_budget(self) -> None:
        """Refuse, in one line and before anything is read, a source that must be read whole
        and is larger than ``dataset.memory_budget``."""
        budget = self.memory_budget
        size = None if budget is None or self.streams else self.whole_bytes()
        if size is not None and budget is not None and size > budget:
            raise ConfigError(
                f"{self.source}: this source is read whole while it is processed "
                f"({size / 2**20:,.0f} MiB), more than dataset.memory_budget="
                f"{budget / 2**20:,.0f} MiB; {self.budget_hint()}")

    def budget_hint(self) -> str:
        """What to do when the source is larger than the budget (the refusal's end)."""
        return "raise the budget or unset it"

    def load(self, mmap: bool = True) -> GraphStore:
        """The processed graph, processing (and checking) it first if needed."""
        old = processed.older_format(self.processed_dir)
        if old is not None:  # an older gnnscale's copy: rebuilt from the source, not refused
            print(f"{self.key}: the processed copy is format {old}, this gnnscale writes "
                  f"{processed.FORMAT_VERSION}: reprocessing {self.processed_dir}", flush=True)
            shutil.rmtree(self.processed_dir)
        if not processed.is_processed(self.processed_dir):
            self.check_budget()
            with bounded.staging(self.processed_dir, self.feature_norm,
                                 self.memory_budget) as self.stage:
                graph = self.process()
                graph = normalize_features(graph, self.feature_norm,
                                           frozenset(self.stage.normalized))
                self.check(graph)
                processed.save(graph, self.processed_dir, share=self.root,  # splits share x
                               side=self.beside(), staged=self.stage.held(graph))
                del graph
            self.stage = None
        return processed.load(self.processed_dir, mmap=mmap)


class SpecDataset(Dataset):
    """A dataset whose options are one typed schema, ``spec`` (checked here): its graph's name
    is ``spec.graph`` and its folder ``spec.key()``."""

    def __init__(self, root: str, feature_norm: str, spec: Any,
                 memory_budget: int | str | None = None) -> None:
        super().__init__(root, feature_norm, memory_budget)
        spec.check()
        self.spec, self.name = spec, spec.graph

    @property
    def key(self) -> str:
        """The processed folder's name for this dataset and its options."""
        return self.spec.key()
