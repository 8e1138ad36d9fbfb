"""Tables a finished run writes for the user (predictions, embeddings), keyed by the user's ids.

A table is a set of equally long columns: 1-D arrays, or 2-D ``[rows, width]`` arrays (class
probabilities, embeddings). It is written in the format the user picks:

* ``parquet``: one ``<name>.parquet`` file; a 2-D column becomes one column per entry when
  its entries are named (``prob_<class>``), else one fixed-size list column;
* ``npy``: one folder ``<name>/`` with ``<column>.npy`` per column (2-D ones as they are) and
  ``<column>_names.npy`` beside a 2-D column whose entries are named; every file is a plain
  ``.npy`` (read with ``allow_pickle=False``; strings as fixed-width unicode).

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

import numpy as np

from gnnscale.data.idmap import IdMap
from gnnscale.data.publish import publish_folder, temp_folder, temp_path
from gnnscale.errors import UserError

FORMATS = ("parquet", "npy")
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
    tmp = temp_folder(path)
    try:
        for col, arr in columns.items():
            np.save(tmp / f"{col}.npy", _plain(np.asarray(arr)), allow_pickle=False)
            if col in names:
                np.save(tmp / f"{col}_names.npy", np.asarray([str(n) for n in names[col]]),
                        allow_pickle=False)
        publish_folder(tmp, path, f"{next(iter(columns))}.npy", replace=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def _plain(arr: np.ndarray) -> np.ndarray:
    """Object arrays (strings) as fixed-width unicode: ``.npy`` without pickles."""
    return arr.astype(str) if arr.dtype.kind == "O" else arr


def _arrow_columns(columns: Mapping[str, np.ndarray], names: Mapping[str, list[str]],
                   lo: int, hi: int) -> dict:
    import pyarrow as pa

    out = {}
    for col, arr in columns.items():
        part = np.asarray(arr[lo:hi])
        if part.ndim == 1:
            out[col] = pa.array(_plain(part))
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
