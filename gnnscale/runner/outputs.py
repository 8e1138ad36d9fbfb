"""Tables a finished run writes for the user (predictions, embeddings), keyed by the user's ids.

A table is a set of equally long columns: 1-D arrays, or 2-D ``[rows, width]`` arrays (class
probabilities, embeddings). It is written in the format the user picks:

* ``parquet``: one ``<name>.parquet`` file; a 2-D column becomes one column per entry when
  its entries are named (``prob_<class>``), else one fixed-size list column;
* ``npy``: one folder ``<name>/`` with ``<column>.npy`` per column (2-D ones as they are) and
  ``<column>_names.npy`` beside a 2-D column whose entries are named; every file is a plain
  ``.npy`` (read with ``allow_pickle=False``; strings as fixed-width unicode, so a string that
  ends in a NUL character is refused there: Parquet keeps it). The folder holds
  a mark (``.gnnscale-table``); an existing ``<name>/`` without it that is not empty (a folder
  of the user's) is never replaced: the write is refused in one line.

Either way the table is built beside its final place and renamed into it once complete
(:mod:`gnnscale.data.publish`): a failed write leaves the previous table as it was. The key
column, ``id`` (or ``src``/``dst``), holds the user's ids when the graph has an
:class:`~gnnscale.data.idmap.IdMap`, else the internal ones.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gnnscale.data.idmap import IdMap
from gnnscale.data.publish import publish_folder, temp_folder, temp_path
from gnnscale.errors import UserError

FORMATS = ("parquet", "npy")
#: the file that marks a ``.npy`` table folder as gnnscale's own (only such a folder, or an
#: empty one, is replaced by the next table of that name)
TABLE_MARK = ".gnnscale-table"
#: rows per Parquet row group (a 2-D column is converted one group at a time)
ROW_GROUP = 1 << 16


def check_format(fmt: str) -> str:
    """``fmt`` if it is one of :data:`FORMATS`, else a one-line :class:`UserError`."""
    if fmt not in FORMATS:
        raise UserError(f"format={fmt!r}: choose one of {', '.join(FORMATS)}")
    return fmt


def table_path(out_dir: Path, name: str, fmt: str) -> Path:
    """Where table ``name`` goes: ``<out_dir>/<name>.parquet`` or the folder ``<name>``."""
    return out_dir / (f"{name}.parquet" if fmt == "parquet" else name)


def show_progress(progress: bool | None) -> bool:
    """``progress=None``: a bar only when stderr is a terminal."""
    return sys.stderr.isatty() if progress is None else bool(progress)


def bar(total: int, desc: str, progress: bool):
    """A tqdm bar of ``total`` steps, or None when off."""
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, dynamic_ncols=True, leave=False)


def user_ids(ids: IdMap | None, node_type: str, local: np.ndarray) -> np.ndarray:
    """The user's ids of type-local ids ``local`` (the internal ids without a map)."""
    local = np.asarray(local, dtype=np.int64)
    if ids is None or node_type not in ids.node_types:
        return local
    return ids.to_user(node_type, local)


def key_columns(g: Any, ids: IdMap | None, nodes: Any, name: str = "id"
                ) -> dict[str, np.ndarray]:
    """The user's ids (``ids``; internal ids without a map) of the global ``nodes`` (a tensor)
    of graph ``g`` as column ``name``, with ``<name>_type`` when they span several node types
    (the ids are then strings if the types' ids differ in kind)."""
    import torch

    nodes = nodes.long()
    if len(g.node_types) == 1:
        return {name: user_ids(ids, g.node_types[0], nodes.numpy())}
    which = g.node_type_of(nodes).numpy()
    parts = {}
    for t in np.unique(which):
        at = which == t
        node_type = g.node_types[int(t)]
        local = g.to_local(node_type, nodes[torch.from_numpy(at)]).numpy()
        parts[int(t)] = (at, user_ids(ids, node_type, local))
    if len(parts) == 1:
        return {name: next(iter(parts.values()))[1]}
    kinds = {v.dtype.kind for _, v in parts.values()}
    col = np.empty(len(nodes), dtype=np.int64 if kinds <= set("iu") else object)
    for at, v in parts.values():  # strings stay str objects: exact, NUL characters kept
        col[at] = v if col.dtype != object or v.dtype == object else \
            np.array([str(x) for x in v.tolist()], dtype=object)
    types = np.asarray(g.node_types)[which]
    return {f"{name}_type": types, name: col}


def internal_ids(ids: IdMap | None, node_type: str, user: np.ndarray, num_nodes: int,
                 what: str) -> np.ndarray:
    """Type-local internal ids of the user's ids ``user`` (``what`` names them in errors)."""
    if ids is not None and node_type in ids.node_types:
        try:
            return ids.to_internal(node_type, user)
        except KeyError as err:
            raise UserError(f"{what}: {err.args[0]}") from None
    arr = np.asarray(user)
    if arr.dtype.kind not in "iu":
        raise UserError(f"{what}: the graph has no id map, so ids are internal integers "
                        f"0..{num_nodes - 1}; got {arr.dtype} values")
    arr = arr.astype(np.int64)
    bad = (arr < 0) | (arr >= num_nodes)
    if bad.any():
        raise UserError(f"{what}: id {int(arr[bad][0])} is not a node (internal ids run "
                        f"0..{num_nodes - 1})")
    return arr


def write_table(out_dir: Path, name: str, columns: Mapping[str, np.ndarray], fmt: str,
                names: Mapping[str, list[str]] | None = None) -> Path:
    """Write ``columns`` as table ``name`` under ``out_dir`` in ``fmt``; returns its path.
    ``names``: the entry names of 2-D columns (``prob`` -> class names)."""
    check_format(fmt)
    names = dict(names or {})
    rows = {len(c) for c in columns.values()}
    if len(rows) > 1:
        raise ValueError(f"columns of table {name} differ in length: {sorted(rows)}")
    path = table_path(Path(out_dir), name, fmt)
    if fmt == "parquet":
        return write_parquet(path, columns, names)
    check_replaceable(path)
    tmp = temp_folder(path)
    try:
        (tmp / TABLE_MARK).write_text(f"a table gnnscale wrote ({name}): replaced by the next "
                                      "one written here\n")
        for col, arr in columns.items():
            np.save(tmp / f"{col}.npy", npy_strings(np.asarray(arr), f"column {col} of {name}"),
                    allow_pickle=False)
            if col in names:
                np.save(tmp / f"{col}_names.npy",
                        npy_strings(np.array([str(n) for n in names[col]], dtype=object),
                                    f"the names of column {col}"), allow_pickle=False)
        publish_folder(tmp, path, f"{next(iter(columns))}.npy", replace=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def check_replaceable(path: Path) -> None:
    """Refuse (one :class:`UserError` line) to replace ``path`` unless it is absent, an empty
    folder or a table folder gnnscale wrote (it holds :data:`TABLE_MARK`): a folder of the
    user's that happens to have a table's name is never deleted."""
    if not os.path.lexists(path):
        return
    if path.is_dir() and not path.is_symlink():
        if (path / TABLE_MARK).is_file():
            return
        entries = sorted(e.name for e in path.iterdir())
        if not entries:
            return
        held = f"it holds {entries[0]}" + (f" and {len(entries) - 1} more" if len(entries) > 1
                                            else "")
    else:
        held = "it is a file" if not path.is_symlink() else "it is a link"
    raise UserError(f"{path} exists and is not a table gnnscale wrote ({held}); a table is "
                    "never written over your files: move it away, or give out= another folder")


def npy_strings(arr: np.ndarray, what: str) -> np.ndarray:
    """Object arrays (strings) as fixed-width unicode, for an ``.npy`` without pickles; a
    string that ends in a NUL character (numpy unicode drops it) is a one-line
    :class:`UserError` naming ``what``: Parquet keeps it."""
    if arr.dtype.kind != "O":
        return arr
    values = [str(v) for v in arr.reshape(-1).tolist()]
    bad = next((v for v in values if v.endswith("\x00")), None)
    if bad is not None:
        raise UserError(f"{what}: {bad!r} ends in a NUL character, which an .npy's fixed-width "
                        "unicode drops: write format=parquet, which keeps it")
    return np.array(values, dtype=str).reshape(arr.shape) if values else \
        np.zeros(arr.shape, "<U1")


def _arrow_columns(columns: Mapping[str, np.ndarray], names: Mapping[str, list[str]],
                   lo: int, hi: int) -> dict:
    import pyarrow as pa

    out = {}
    for col, arr in columns.items():
        part = np.asarray(arr[lo:hi])
        if part.ndim == 1:  # unicode via Python strings: pyarrow cuts numpy's at a NUL
            out[col] = pa.array(part.astype(object) if part.dtype.kind == "U" else part)
        elif col in names:
            for j, entry in enumerate(names[col]):
                out[f"{col}_{entry}"] = pa.array(np.ascontiguousarray(part[:, j]))
        else:
            flat = pa.array(np.ascontiguousarray(part).reshape(-1))
            out[col] = pa.FixedSizeListArray.from_arrays(flat, part.shape[1])
    return out


def write_parquet(path: Path, columns: Mapping[str, np.ndarray],
                  names: Mapping[str, list[str]] | None = None) -> Path:
    """``columns`` as the Parquet file ``path``, one row group of :data:`ROW_GROUP` rows at a
    time (a memory-mapped column is read one group at a time), renamed into place."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = len(next(iter(columns.values())))
    tmp = temp_path(path, "parquet")
    writer = None
    try:
        for lo in range(0, max(n, 1), ROW_GROUP):
            batch = pa.table(_arrow_columns(columns, names or {}, lo, min(n, lo + ROW_GROUP)))
            if writer is None:
                writer = pq.ParquetWriter(tmp, batch.schema)
            writer.write_table(batch)
        writer.close()
        writer = None
        os.replace(tmp, path)
    finally:
        if writer is not None:
            writer.close()
        tmp.unlink(missing_ok=True)
    return path


def read_table(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """A table :func:`write_table` wrote, as columns (Parquet's list columns as 2-D arrays;
    an ``npy`` folder's ``*_names.npy`` files are left out)."""
    path = Path(path)
    if path.is_dir():
        return {p.stem: np.load(p, allow_pickle=False) for p in sorted(path.glob("*.npy"))
                if not p.stem.endswith("_names")}
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    out = {}
    for col in table.column_names:
        data = table.column(col).combine_chunks()
        if hasattr(data, "flatten") and hasattr(data.type, "list_size"):
            out[col] = data.flatten().to_numpy().reshape(len(data), data.type.list_size)
        else:
            out[col] = data.to_numpy(zero_copy_only=False)
    return out


def read_pairs(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` user ids from a file: ``.npy`` ``[P, 2]`` or ``[2, P]``; ``.csv`` or
    ``.parquet`` with columns ``src`` and ``dst`` (else its first two columns)."""
    path = Path(os.path.expanduser(str(path)))
    if not path.is_file():
        raise UserError(f"pairs={path}: no such file (give a .csv, .parquet or .npy of "
                        "source and destination ids)")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        arr = np.load(path, allow_pickle=False)
        if arr.ndim == 2 and arr.shape[1] == 2:
            return arr[:, 0], arr[:, 1]
        if arr.ndim == 2 and arr.shape[0] == 2:
            return arr[0], arr[1]
        raise UserError(f"pairs={path}: an .npy of pairs must be [P, 2] or [2, P], got shape "
                        f"{arr.shape}")
    if suffix == ".csv":
        import pyarrow.csv as pcsv

        table = pcsv.read_csv(path)
    elif suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        table = pq.read_table(path)
    else:
        raise UserError(f"pairs={path}: read .csv, .parquet or .npy files, got {suffix!r}")
    cols = table.column_names
    keys = ("src", "dst") if {"src", "dst"} <= set(cols) else tuple(cols[:2])
    if len(keys) < 2:
        raise UserError(f"pairs={path}: needs two columns (src, dst), found {cols}")
    return tuple(table.column(k).to_numpy(zero_copy_only=False) for k in keys)
