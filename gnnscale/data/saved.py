"""``dataset=saved dataset.path=DIR``: a graph already in the processed format.

``DIR`` holds ``meta.json`` and the ``.npy`` arrays that :func:`gnnscale.data.processed.save`
writes (and, optionally, the user's ids, :mod:`gnnscale.data.idmap`). The folder is read as it
is, verified like every processed copy, and never rewritten or removed: there is no source to
rebuild it from, so a folder of an older format is refused rather than reprocessed.
``gnnscale.train(data=graph)`` saves a graph given from Python this way (under ``data_root``,
keyed by its checksum) and trains on it with this option.
"""

from __future__ import annotations

from pathlib import Path

from gnnscale.data import processed
from gnnscale.data.base import Dataset
from gnnscale.data.graph import GraphStore
from gnnscale.data.schemas import SavedConfig, feature_norm_of
from gnnscale.errors import ConfigError


class SavedDataset(Dataset):
    """A processed folder, read as it is."""

    def __init__(self, root: str = "data", path: str | None = None,
                 feature_norm: str = "none",
                 memory_budget: int | str | None = None) -> None:
        super().__init__(root, feature_norm, memory_budget)
        self.spec = SavedConfig(path=path, feature_norm=feature_norm_of(feature_norm))
        self.spec.check()
        self.path = self.spec.folder()

    @property
    def key(self) -> str:
        """The folder's name (its parent's when it is called ``processed``)."""
        return self.path.parent.name if self.path.name == "processed" else self.path.name

    @property
    def processed_dir(self) -> Path:
        """The folder itself."""
        return self.path

    @property
    def source(self) -> str:
        """The folder."""
        return str(self.path)

    def process(self) -> GraphStore:
        """Nothing to process from: the folder must hold a saved graph."""
        raise ConfigError(f"dataset.path={self.path} holds no processed graph (no meta.json): "
                          "save one there with gnnscale.data.processed.save(graph, DIR)")

    def load(self, mmap: bool = True) -> GraphStore:
        """The saved graph, verified; an older format is refused (nothing to rebuild from)."""
        old = processed.older_format(self.path)
        if old is not None:
            raise ConfigError(f"{self.path} holds processed format {old}, this gnnscale reads "
                              f"{processed.FORMAT_VERSION}: save the graph again")
        if not processed.is_processed(self.path):
            self.process()
        return processed.load(self.path, mmap=mmap)
