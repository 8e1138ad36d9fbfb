"""Dataset base class: produce a :class:`GraphStore` once, then memory-map the processed copy."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path

from gnnscale.data import processed
from gnnscale.data.checks import check_task
from gnnscale.data.graph import GraphStore


class Dataset(ABC):
    """A named graph source. Subclasses implement :meth:`process` (raw -> GraphStore).

    ``root`` holds ``<root>/<key>/processed``; :meth:`load` builds it on the first call (in one
    process: the runner loads before it spawns ranks) and memory-maps it afterwards.
    """

    def __init__(self, root: str = "data") -> None:
        self.root = Path(os.path.expanduser(str(root)))

    @property
    @abstractmethod
    def key(self) -> str:
        """Folder name that identifies this dataset and every option that changes its content."""

    @abstractmethod
    def process(self) -> GraphStore:
        """Read raw files (or generate) and return the graph."""

    @property
    def processed_dir(self) -> Path:
        return self.root / self.key / "processed"

    @property
    def source(self) -> str:
        """What error messages about this dataset's content name (a file, or the key)."""
        return f"dataset {self.key}"

    def check(self, graph: GraphStore) -> None:
        """Checks on a freshly processed graph (see :mod:`gnnscale.data.checks`)."""
        check_task(graph, self.source)

    def load(self, mmap: bool = True) -> GraphStore:
        """The processed graph, processing (and checking) it first if needed."""
        if not processed.is_processed(self.processed_dir):
            graph = self.process()
            self.check(graph)
            processed.save(graph, self.processed_dir)
        return processed.load(self.processed_dir, mmap=mmap)
