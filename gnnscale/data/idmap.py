"""The user's own node ids beside a processed graph: internal id <-> the id of the user's record.

A graph read from the user's tables (CSV/Parquet with integer or string ids) numbers its nodes
``0..N-1`` per node type, in the order the node table lists them; predictions and embeddings go
back keyed by the user's ids. The map is one array per node type, in internal order, stored
next to the processed arrays as ``ids__<type>.npy``: int64 for integer ids, fixed-width unicode
(``<U{n}``) for strings -- both plain ``.npy`` files read with ``allow_pickle=False``, so
loading a map never unpickles anything. A graph without a map (generated, ``.npz``, OGB...)
has ``IdMap.load(folder) is None`` and its ids are the internal ones.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

PREFIX = "ids__"


class IdMap:
    """Per node type, the user's id of every internal (type-local) id."""

    def __init__(self, ids: Mapping[str, np.ndarray]) -> None:
        self.ids: dict[str, np.ndarray] = {}
        for node_type, arr in ids.items():
            arr = np.asarray(arr)
            if arr.ndim != 1:
                raise ValueError(f"ids of node type {node_type!r} must be 1-D, got shape "
                                 f"{arr.shape}")
            if arr.dtype.kind in "iu":
                arr = arr.astype(np.int64, copy=False)
            elif arr.dtype.kind in "OU":
                arr = arr.astype(str)
            else:
                raise ValueError(f"ids of node type {node_type!r} must be integers or strings, "
                                 f"got {arr.dtype}")
            self.ids[str(node_type)] = arr
        self._index: dict[str, np.ndarray] = {}  # per type: argsort of its ids

    def __repr__(self) -> str:
        return "IdMap(" + ", ".join(f"{t}: {len(a):,}" for t, a in self.ids.items()) + ")"

    @property
    def node_types(self) -> tuple[str, ...]:
        """The node types that have a map."""
        return tuple(self.ids)

    def to_user(self, node_type: str, local: np.ndarray) -> np.ndarray:
        """The user's ids of type-local internal ids ``local``."""
        return self._of(node_type)[np.asarray(local, dtype=np.int64)]

    def to_internal(self, node_type: str, user: np.ndarray | list) -> np.ndarray:
        """The type-local internal ids of the user's ids ``user``; an unknown id is a
        ``KeyError`` naming it."""
        arr = self._of(node_type)
        order = self._index.get(node_type)
        if order is None:
            order = self._index[node_type] = np.argsort(arr, kind="stable")
        want = np.asarray(user).astype(str) if arr.dtype.kind == "U" else \
            np.asarray(user, dtype=np.int64)
        pos = np.searchsorted(arr[order], want)
        pos = np.minimum(pos, len(arr) - 1) if len(arr) else pos
        found = len(arr) > 0 and bool(np.all(arr[order][pos] == want)) if len(want) else True
        if not found:
            bad = want[(pos >= len(arr)) | (arr[order][np.minimum(pos, max(len(arr) - 1, 0))]
                                            != want)][0] if len(arr) else want[0]
            raise KeyError(f"node type {node_type!r} has no node with id {bad.item()!r}")
        return order[pos].astype(np.int64)

    def _of(self, node_type: str) -> np.ndarray:
        if node_type not in self.ids:
            raise KeyError(f"no id map for node type {node_type!r} (types with one: "
                           f"{', '.join(self.ids) or 'none'})")
        return self.ids[node_type]

    def files(self) -> dict[str, np.ndarray]:
        """``file stem -> array`` as stored: ``ids__<type>``."""
        return {PREFIX + t: a for t, a in self.ids.items()}

    def save(self, folder: str | os.PathLike) -> list[Path]:
        """Write one ``ids__<type>.npy`` per node type into ``folder``; returns the paths."""
        paths = []
        for stem, arr in self.files().items():
            path = Path(folder) / f"{stem}.npy"
            np.save(path, arr, allow_pickle=False)
            paths.append(path)
        return paths

    @classmethod
    def load(cls, folder: str | os.PathLike) -> IdMap | None:
        """The map stored in ``folder`` (None: the graph has none)."""
        found = sorted(Path(folder).glob(f"{PREFIX}*.npy"))
        if not found:
            return None
        return cls({p.stem[len(PREFIX):]: np.load(p, allow_pickle=False, mmap_mode="r")
                    for p in found})
