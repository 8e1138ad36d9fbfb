"""A processed dataset's sizes from its ``meta.json`` alone (torch-free): what the launcher's
checks read instead of loading the graph."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the processed format this reader understands (``gnnscale.data.processed.FORMAT_VERSION``)
FORMAT = 2


@dataclass(frozen=True)
class DatasetMeta:
    """Sizes and splits of a processed graph."""

    name: str
    num_nodes: int
    num_edges: int
    num_features: int
    num_classes: int
    num_train: int
    has_features: bool
    has_labels: bool
    has_train: bool
    has_edge_weight: bool = False
    checksum: str | None = None

    @classmethod
    def read(cls, folder: str | Path | None) -> DatasetMeta | None:
        """The metadata of the processed graph in ``folder``; None when there is none, or
        anything about it is unexpected (the loader then says what)."""
        if folder is None:
            return None
        try:
            meta = json.loads((Path(folder) / "meta.json").read_text())
            if meta.get("format") != FORMAT:
                return None
            arrays: dict[str, Any] = meta["arrays"]
            train = arrays.get("train_idx")
            return cls(name=str(meta["name"]), num_nodes=int(meta["num_nodes"]),
                       num_edges=int(meta["num_edges"]),
                       num_features=int(meta["num_features"]),
                       num_classes=int(meta["num_classes"]),
                       num_train=int(train["shape"][0]) if train else 0,
                       has_features="x" in arrays, has_labels="y" in arrays,
                       has_train=train is not None,
                       has_edge_weight="edge_weight" in arrays,
                       checksum=str(meta["checksum"]))
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None

    @classmethod
    def of(cls, graph: Any) -> DatasetMeta:
        """The metadata of a loaded graph (a :class:`~gnnscale.data.graph.GraphStore`)."""
        train = graph.train_idx
        return cls(name=graph.name, num_nodes=int(graph.num_nodes),
                   num_edges=int(graph.num_edges), num_features=int(graph.num_features),
                   num_classes=int(graph.num_classes),
                   num_train=0 if train is None else int(train.numel()),
                   has_features=graph.x is not None, has_labels=graph.y is not None,
                   has_train=train is not None, has_edge_weight=graph.edge_weight is not None,
                   checksum=graph.meta.get("checksum"))
