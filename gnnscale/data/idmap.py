"""The user's own node ids beside a processed graph: internal id <-> the id of the user's record.

A graph read from the user's tables (CSV/Parquet with integer or string ids) numbers its nodes
``0..N-1`` per node type, in the order the node table lists them; predictions and embeddings go
back keyed by the user's ids. The map is one array per node type, in internal order, stored
next to the processed arrays as plain ``.npy`` files read with ``allow_pickle=False``, so
loading a map never unpickles anything: integer ids as ``ids__<type>.npy`` (int64); string
ids as their UTF-8 bytes, ``idtext__<type>.npy`` (uint8, all ids one after another), and where
each one ends, ``idends__<type>.npy`` (int64, one per node). Strings are kept byte for byte,
NUL characters included (``n5`` and ``n5\\x00`` are two ids), and a map loads without
decoding: the two files are memory-mapped and read as one Arrow string array. A type whose
labels were class names keeps them the same way, ``classtext__<type>.npy`` and
``classends__<type>.npy`` (label ``c`` is ``names[c]``): :meth:`IdMap.class_names`. Folders an
older gnnscale wrote keep strings as fixed-width unicode (``ids__<type>.npy``,
``classes__<type>.npy`` of ``<U{n}``); they are read as they are (that gnnscale refused ids
and class names that end in a NUL, the one thing numpy unicode cannot hold). A graph without a
map (generated, ``.npz``, OGB...) has ``IdMap.load(folder) is None`` and its ids are the
internal ones.

In a processed folder the map is part of the graph (:func:`gnnscale.data.processed.save`'s
side arrays): listed in ``meta.json``, in its checksum, its lengths checked against the node
counts, so :meth:`IdMap.load` of a processed folder verifies it as the graph's loader does and
refuses a map that is not the graph's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gnnscale.data.metadata import SIDE_PREFIXES

PREFIX = "ids__"
CLASSES = "classes__"
#: string ids: UTF-8 bytes and end offsets; class names the same way
ID_TEXT, ID_ENDS = "idtext__", "idends__"
CLASS_TEXT, CLASS_ENDS = "classtext__", "classends__"

#: the ids of one node type as given: an array (integers, strings) or a list of strings
Ids: TypeAlias = Any


def encode_text(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(ends, utf8)`` of a string array (no nulls): int64 end offset of every string and
    uint8 bytes of all of them, one after another."""
    arr = values.cast(pa.large_string())
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset:arr.offset + n + 1] \
        if n else np.zeros(1, np.int64)
    data = arr.buffers()[2]
    utf8 = np.frombuffer(data, np.uint8)[offsets[0]:offsets[-1]].copy() if data is not None \
        else np.zeros(0, np.uint8)
    return (offsets[1:] - offsets[0]).astype(np.int64), utf8


def decode_text(ends: np.ndarray, utf8: np.ndarray, what: str) -> pa.Array:
    """The Arrow string array of :func:`encode_text`'s ``(ends, utf8)``, zero-copy over
    ``utf8`` (memory-mapped arrays stay mapped); a ValueError naming ``what`` when the ends
    are not ascending within the bytes or the bytes are not UTF-8."""
    ends = np.asarray(ends)
    utf8 = np.ascontiguousarray(utf8)
    if ends.ndim != 1 or ends.dtype != np.int64 or utf8.ndim != 1 or utf8.dtype != np.uint8:
        raise ValueError(f"{what}: ends must be 1-D int64 and text 1-D uint8, got "
                         f"{ends.dtype} {ends.shape} and {utf8.dtype} {utf8.shape}")
    offsets = np.concatenate([np.zeros(1, np.int64), ends])
    if (len(ends) and int(ends[-1]) != len(utf8)) or bool(np.any(np.diff(offsets) < 0)):
        raise ValueError(f"{what}: the ends of its strings are not ascending up to the "
                         f"{len(utf8)} bytes of its text")
    arr = pa.LargeStringArray.from_buffers(len(ends), pa.py_buffer(offsets),
                                           pa.py_buffer(utf8) if len(utf8) else None)
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid as err:
        raise ValueError(f"{what}: its text is not UTF-8 ({err})") from None
    return arr


def _text(values: object, what: str) -> pa.Array:
    """Strings (an Arrow array, an object array of ``str``, numpy unicode) as one Arrow
    large_string array, exactly as given."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)) \
                or values.null_count:
            raise ValueError(f"{what} must be strings without nulls, got {values.type}")
        return values.cast(pa.large_string())
    # a list stays a list: numpy unicode would drop trailing NUL characters
    items = list(values) if isinstance(values, (list, tuple)) else \
        np.asarray(values).astype(object).tolist()
    if not all(isinstance(v, str) for v in items):
        raise ValueError(f"{what} must all be integers or all strings")
    try:
        return pa.array(items, pa.large_string())
    except (pa.ArrowException, UnicodeError) as err:
        raise ValueError(f"{what} are not all UTF-8 strings ({err})") from None


class IdMap:
    """Per node type, the user's id of every internal (type-local) id."""

    def __init__(self, ids: Mapping[str, Ids],
                 classes: Mapping[str, Ids] | None = None) -> None:
        self._maps: dict[str, np.ndarray | pa.Array] = {}
        for node_type, arr in ids.items():
            what = f"ids of node type {node_type!r}"
            if isinstance(arr, (list, tuple)) and arr and all(isinstance(v, str) for v in arr):
                self._maps[str(node_type)] = _text(arr, what)  # not via numpy unicode
                continue
            if not isinstance(arr, (pa.Array, pa.ChunkedArray)):
                arr = np.asarray(arr)
                if arr.ndim != 1:
                    raise ValueError(f"{what} must be 1-D, got shape {arr.shape}")
                if arr.dtype.kind not in "iuOU":
                    raise ValueError(f"{what} must be integers or strings, got {arr.dtype}")
            if isinstance(arr, np.ndarray) and arr.dtype.kind in "iu":
                self._maps[str(node_type)] = arr.astype(np.int64, copy=False)
            else:
                self._maps[str(node_type)] = _text(arr, what)
        self._classes: dict[str, pa.Array] = {}
        for node_type, names in (classes or {}).items():
            what = f"class names of node type {node_type!r}"
            if not isinstance(names, (pa.Array, pa.ChunkedArray, list, tuple)):
                names = np.asarray(names)
                if names.ndim != 1 or names.dtype.kind not in "OU":
                    raise ValueError(f"{what} must be a 1-D array of strings, got "
                                     f"{names.dtype} {names.shape}")
            self._classes[str(node_type)] = _text(names, what)
        self._index: dict[str, np.ndarray] = {}  # per integer type: argsort of its ids

    def __repr__(self) -> str:
        return "IdMap(" + ", ".join(f"{t}: {len(a):,}" for t, a in self._maps.items()) + ")"

    @property
    def node_types(self) -> tuple[str, ...]:
        """The node types that have a map."""
        return tuple(self._maps)

    @property
    def ids(self) -> dict[str, np.ndarray]:
        """Per node type its ids in internal order: int64, or an object array of ``str``
        (built on each call for string ids: :meth:`to_user` reads only the rows asked)."""
        return {t: self._values(a) for t, a in self._maps.items()}

    @staticmethod
    def _values(arr: np.ndarray | pa.Array) -> np.ndarray:
        if isinstance(arr, np.ndarray):
            return arr
        return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=object)

    def is_text(self, node_type: str) -> bool:
        """Whether ``node_type``'s ids are strings."""
        return not isinstance(self._of(node_type), np.ndarray)

    def to_user(self, node_type: str, local: np.ndarray) -> np.ndarray:
        """The user's ids of type-local internal ids ``local``: int64, or an object array of
        ``str`` (exact: NUL characters kept)."""
        arr = self._of(node_type)
        local = np.asarray(local, dtype=np.int64)
        if isinstance(arr, np.ndarray):
            return arr[local]
        if local.size and (local.min() < 0 or local.max() >= len(arr)):
            raise IndexError(f"internal id out of range 0..{len(arr) - 1} of node type "
                             f"{node_type!r}")
        return self._values(arr.take(pa.array(local.reshape(-1)))).reshape(local.shape)

    def to_internal(self, node_type: str, user: np.ndarray | list) -> np.ndarray:
        """The type-local internal ids of the user's ids ``user``; an unknown id is a
        ``KeyError`` naming it."""
        arr = self._of(node_type)
        if not isinstance(arr, np.ndarray):
            want = _text(_as_str(user), "ids")
            pos = pc.index_in(want, value_set=arr)
            if pos.null_count:
                bad = want[int(np.flatnonzero(pos.is_null().to_numpy(
                    zero_copy_only=False))[0])].as_py()
                raise KeyError(f"node type {node_type!r} has no node with id {bad!r}")
            return pos.to_numpy(zero_copy_only=False).astype(np.int64)
        order = self._index.get(node_type)
        if order is None:
            order = self._index[node_type] = np.argsort(arr, kind="stable")
        want = np.asarray(user, dtype=np.int64)
        pos = np.searchsorted(arr[order], want)
        pos = np.minimum(pos, len(arr) - 1) if len(arr) else pos
        found = len(arr) > 0 and bool(np.all(arr[order][pos] == want)) if len(want) else True
        if not found:
            bad = want[(pos >= len(arr)) | (arr[order][np.minimum(pos, max(len(arr) - 1, 0))]
                                            != want)][0] if len(arr) else want[0]
            raise KeyError(f"node type {node_type!r} has no node with id {bad.item()!r}")
        return order[pos].astype(np.int64)

    def class_names(self, node_type: str) -> np.ndarray | None:
        """The class names of ``node_type``'s labels (an object array of ``str``: label ``c``
        is ``names[c]``); None when its labels were integers (the label is the class)."""
        names = self._classes.get(node_type)
        return None if names is None else self._values(names)

    def _of(self, node_type: str) -> np.ndarray | pa.Array:
        if node_type not in self._maps:
            raise KeyError(f"no id map for node type {node_type!r} (types with one: "
                           f"{', '.join(self._maps) or 'none'})")
        return self._maps[node_type]

    def files(self) -> dict[str, np.ndarray]:
        """``file stem -> array`` as stored: ``ids__<type>`` (int64 ids), ``idends__<type>``
        and ``idtext__<type>`` (string ids), ``classends__<type>`` and ``classtext__<type>``."""
        out: dict[str, np.ndarray] = {}
        for t, arr in self._maps.items():
            if isinstance(arr, np.ndarray):
                out[PREFIX + t] = arr
            else:
                out[ID_ENDS + t], out[ID_TEXT + t] = encode_text(arr)
        for t, names in self._classes.items():
            out[CLASS_ENDS + t], out[CLASS_TEXT + t] = encode_text(names)
        return out

    def save(self, folder: str | os.PathLike) -> list[Path]:
        """Write the map's files (:meth:`files`) into ``folder``; returns the paths. Not into
        a processed folder: there the map is part of the graph
        (``processed.save(..., side=map.files())``), listed and verified with it."""
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
                      if p.stem.startswith(SIDE_PREFIXES)}
        ids = _stored(arrays, PREFIX, ID_ENDS, ID_TEXT, folder)
        if not ids:
            return None
        return cls(ids, _stored(arrays, CLASSES, CLASS_ENDS, CLASS_TEXT, folder))


def _stored(arrays: dict[str, np.ndarray], plain: str, ends: str, text: str, folder: Path
            ) -> dict[str, Ids]:
    """Per node type the values of one kind of side array: ``plain`` (int64, or an older
    gnnscale's unicode) or the ``ends`` and ``text`` pair."""
    out: dict[str, Ids] = {n[len(plain):]: a for n, a in arrays.items() if n.startswith(plain)}
    for name in (n for n in arrays if n.startswith(ends)):
        t = name[len(ends):]
        if text + t not in arrays:
            raise ValueError(f"{folder}: {name}.npy has no {text}{t}.npy beside it")
        out[t] = decode_text(arrays[name], arrays[text + t], f"{folder}/{text}{t}.npy")
    lone = [n for n in arrays if n.startswith(text) and ends + n[len(text):] not in arrays]
    if lone:
        raise ValueError(f"{folder}: {lone[0]}.npy has no {ends}{lone[0][len(text):]}.npy "
                         "beside it")
    return out


def _as_str(user: object) -> list[str]:
    """The user's ids as Python strings (numbers as their decimal text), NULs kept."""
    if isinstance(user, (pa.Array, pa.ChunkedArray)):
        user = user.to_pylist()
    values = user.tolist() if isinstance(user, np.ndarray) else list(user)  # type: ignore
    return [v if isinstance(v, str) else str(v) for v in values]
