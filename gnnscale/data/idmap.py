"""The user's own node ids beside a processed graph: internal id <-> the id of the user's record.

A graph read from the user's tables (CSV/Parquet with integer or string ids) numbers its nodes
``0..N-1`` per node type, in the order the node table lists them; predictions and embeddings go
back keyed by the user's ids. The map is one array per node type, in internal order, stored
next to the processed arrays as ``ids__<type>.npy``: int64 for integer ids, fixed-width unicode
(``<U{n}``) for strings -- both plain ``.npy`` files read with ``allow_pickle=False``, so
loading a map never unpickles anything. A type whose labels were class names keeps them too,
``classes__<type>.npy`` (unicode, label ``c`` is ``classes[c]``): :meth:`IdMap.class_names`.
A graph without a map (generated, ``.npz``, OGB...) has ``IdMap.load(folder) is None`` and its
ids are the internal ones.

In a processed folder the map is part of the graph (:func:`gnnscale.data.processed.save`'s
side arrays): listed in ``meta.json``, in its checksum, its lengths checked against the node
counts, so :meth:`IdMap.load` of a processed folder verifies it as the graph's loader does and
refuses a map that is not the graph's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

PREFIX = "ids__"
CLASSES = "classes__"


class IdMap:
    """Per node type, the user's id of every internal (type-local) id."""

    def __init__(self, ids: Mapping[str, np.ndarray],
                 classes: Mapping[str, np.ndarray] | None = None) -> None:
        self.ids: dict[str, np.ndarray] = {}
        for node_type, arr in ids.items():
            arr = np.asarray(arr)
            if arr.ndim != 1:
                raise ValueError(f"ids of node type {node_type!r} must be 1-D, got shape "
                                 f"{arr.shape}")
            if arr.dtype.kind in "iu":
                arr = arr.astype(np.int64, copy=False)
            elif arr.dtype.kind == "O":
                arr = arr.astype(str)
            elif arr.dtype.kind != "U":
                raise ValueError(f"ids of node type {node_type!r} must be integers or strings, "
                                 f"got {arr.dtype}")
            self.ids[str(node_type)] = arr
        self.classes: dict[str, np.ndarray] = {}
        for node_type, names in (classes or {}).items():
            names = np.asarray(names)
            if names.ndim != 1 or names.dtype.kind not in "OU":
                raise ValueError(f"class names of node type {node_type!r} must be a 1-D array "
                                 f"of strings, got {names.dtype} {names.shape}")
            self.classes[str(node_type)] = names.astype(str) if names.dtype.kind == "O" \
                else names
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

    def class_names(self, node_type: str) -> np.ndarray | None:
        """The class names of ``node_type``'s labels (label ``c`` is ``names[c]``); None when
        its labels were integers (the label is the class)."""
        return self.classes.get(node_type)

    def _of(self, node_type: str) -> np.ndarray:
        if node_type not in self.ids:
            raise KeyError(f"no id map for node type {node_type!r} (types with one: "
                           f"{', '.join(self.ids) or 'none'})")
        return self.ids[node_type]

    def files(self) -> dict[str, np.ndarray]:
        """``file stem -> array`` as stored: ``ids__<type>``, ``classes__<type>``."""
        return {**{PREFIX + t: a for t, a in self.ids.items()},
                **{CLASSES + t: a for t, a in self.classes.items()}}

    def save(self, folder: str | os.PathLike) -> list[Path]:
        """Write one ``ids__<type>.npy`` per node type (and ``classes__<type>.npy`` per type
        with class names) into ``folder``; returns the paths. Not into a processed folder:
        there the map is part of the graph (``processed.save(..., side=map.files())``),
        listed and verified with it."""
        if (Path(folder) / "meta.json").is_file():
            raise ValueError(f"{folder} is a processed folder: its id map is written with the "
                             "graph, processed.save(graph, folder, side=idmap.files())")
        paths = []
        for stem, arr in self.files().items():
            path = Path(folder) / f"{stem}.npy"
            np.save(path, arr, allow_pickle=False)
            paths.append(path)
        return paths

    @classmethod
    def load(cls, folder: str | os.PathLike) -> IdMap | None:
        """The map stored in ``folder`` (None: the graph has none); in a processed folder
        (one with ``meta.json``) verified with the graph
        (:func:`gnnscale.data.processed.side_arrays`: a stale or foreign map is a
        ``ProcessedDataError`` naming the file)."""
        folder = Path(folder)
        if (folder / "meta.json").is_file():
            from gnnscale.data.processed import side_arrays

            arrays = side_arrays(folder)
        else:
            arrays = {p.stem: np.load(p, allow_pickle=False, mmap_mode="r")
                      for p in sorted(folder.glob("*__*.npy"))
                      if p.stem.startswith((PREFIX, CLASSES))}
        ids = {n[len(PREFIX):]: a for n, a in arrays.items() if n.startswith(PREFIX)}
        if not ids:
            return None
        return cls(ids, {n[len(CLASSES):]: a for n, a in arrays.items()
                         if n.startswith(CLASSES)})
