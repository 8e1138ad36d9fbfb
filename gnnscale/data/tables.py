"""Bring your own tables: ``dataset=tables`` reads node and edge tables (CSV or Parquet).

Each node table lists the nodes of one type, one row per node: the user's own id (integers or
strings), optional feature columns (numeric columns, or one column of lists), an optional
label (integers, or class names mapped to ``0..C-1`` in sorted order; empty: unlabelled) and
an optional split column (``train``, ``val``/``valid``/``validation``, ``test``; empty: in no
split). Internal ids follow the table's row order. Each edge table lists the edges of one edge
type by the user's ids of its two ends, with an optional numeric ``weight`` column and
optional edge feature columns (as a node table's: numeric columns or one column of lists; the
graph's ``edge_attr`` of that type, rows moved with their edges, merged repeats keeping the
first, a ``rev_`` type a copy of its forward type's). The tables are listed in the config
(:class:`~gnnscale.data.schemas.TablesConfig`) or in a small YAML schema file.

Tables are read in batches (``ParquetFile.iter_batches``, ``pyarrow.csv.open_csv``) of the
columns used only, so a table larger than memory streams: memory follows the graph that comes
out, not the text that goes in. Node tables are read first; then each edge batch is mapped to
internal ids by a vectorised lookup (:class:`IdIndex`: the type's ids, or a 64-bit hash of
each string id, sorted once; ``searchsorted`` per batch, a string hit compared with the id).
In CSV every column is read as text and converted here, so that a bad value is named with its
row; an id column whose every value is a plain integer (``12``, ``-3``, not ``012``) holds
integer ids, any other holds strings (Parquet keeps the column's own type).

One node type with one edge type within it is a homogeneous graph, built as
:meth:`GraphStore.from_edge_index` builds it (``symmetrize`` stores every edge both ways,
repeated edges are merged); more types build a typed graph with
:meth:`GraphStore.from_typed` (``symmetrize`` for edge types within one node type,
``add_reverse`` adds ``(dst, rev_<relation>, src)`` for the others). A node without a label is
in no split whatever its split column says; a labelled type without a split column gets a
seeded random split. The user's ids and class names are kept beside the processed graph
(:class:`~gnnscale.data.idmap.IdMap`: integer ids, or strings as their UTF-8 bytes), byte for
byte (NUL characters, ``NA``, numeric-looking strings and all), verified with it.

Bad input is one :class:`TableError` line, raised while the launcher processes the dataset
(before any rank starts): ``<file>:row <N> column <C>: <problem>`` (rows count the data rows
from 1, the header is not one) for an unknown id in an edge table, a duplicate node id, a
missing id or value, a non-numeric feature or weight, a list of the wrong length, an unknown
split value or a bad label; ``<file>: column <C>: ...`` for a missing column.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import torch

from gnnscale.data.base import Dataset
from gnnscale.data.checks import check_task
from gnnscale.data.convert import ratio_split
from gnnscale.data.graph import REVERSE, GraphStore
from gnnscale.data.idmap import IdMap
from gnnscale.data.schemas import (
    EdgeTableConfig,
    NodeTableConfig,
    TablesConfig,
    table_format,
)
from gnnscale.errors import ConfigError

#: a CSV cell that is a plain integer (no sign but '-', no leading zeros)
INT_TEXT = r"^(0|-?[1-9][0-9]*)$"
#: split words (lower case, trimmed) and their codes: 0 none, 1 train, 2 val, 3 test
SPLIT_WORDS = {"": 0, "train": 1, "val": 2, "valid": 2, "validation": 2, "test": 3}
SPLITS = ("train", "val", "test")
CSV_BLOCK = 4 << 20  # bytes of CSV text parsed at a time (a row must fit in one block)
CSV_MAX_HEADER = 64 << 20  # the longest CSV header row read
CSV_MAX_COLUMNS = 100_000  # the most columns a CSV header may name


class TableError(ConfigError):
    """A bad table, cell or column: one line naming the file, row and column."""


def table_error(path: str | Path, problem: str, row: int | None = None,
                column: str | None = None) -> TableError:
    """``<path>:row <row + 1> column <column>: <problem>`` (``row``: 0-based data row)."""
    where = str(path) if row is None else f"{path}:row {row + 1}"
    if column is not None:
        where += f" column {column}" if row is not None else f": column {column}"
    return TableError(f"{where}: {problem}")


# ---- reading -----------------------------------------------------------------------------


class Table:
    """One CSV or Parquet file, read in batches of the columns asked for."""

    def __init__(self, path: str, fmt: str, delimiter: str | None, batch_rows: int,
                 nulls: list[str] | None = None) -> None:
        self.path, self.fmt, self.batch_rows = path, fmt, int(batch_rows)
        self.nulls = [""] + [str(n) for n in nulls or [] if str(n) != ""]  # CSV only
        self.parse = pa_csv.ParseOptions(
            delimiter=delimiter or ("\t" if ".tsv" in Path(path).suffixes else ","))
        self.block = CSV_BLOCK
        try:
            if fmt == "parquet":
                self.names = list(pq.ParquetFile(path).schema_arrow.names)
            else:
                self.block = _csv_block(path, self.parse.delimiter)
                reader = pa_csv.open_csv(path, parse_options=self.parse,
                                         read_options=pa_csv.ReadOptions(block_size=self.block))
                self.names = list(reader.schema.names)
                reader.close()
        except (pa.ArrowException, OSError) as err:
            raise TableError(f"{path}: cannot read it as {fmt} ({_first_line(err)})") from None

    def require(self, columns: dict[str, str]) -> None:
        """Every ``{column: config key}`` is in the file, else one line naming it."""
        for column, key in columns.items():
            if column not in self.names:
                shown = ", ".join(self.names[:12]) + (", ..." if len(self.names) > 12 else "")
                raise table_error(self.path, f"missing (named by {key}; the file has columns "
                                  f"{shown})", column=column)

    def batches(self, columns: list[str]) -> Iterator[tuple[int, pa.RecordBatch]]:
        """``(first row, batch)`` of ``columns`` (CSV: every one read as text), in order."""
        columns = list(dict.fromkeys(columns))
        row = 0
        try:
            if self.fmt == "parquet":
                source = pq.ParquetFile(self.path).iter_batches(batch_size=self.batch_rows,
                                                                columns=columns)
            else:
                source = pa_csv.open_csv(
                    self.path, parse_options=self.parse,
                    read_options=pa_csv.ReadOptions(block_size=self.block),
                    convert_options=pa_csv.ConvertOptions(
                        include_columns=columns, strings_can_be_null=True,
                        null_values=self.nulls,
                        column_types={c: pa.string() for c in columns}))
            for batch in source:
                for start in range(0, batch.num_rows, self.batch_rows):
                    part = batch.slice(start, self.batch_rows)
                    yield row, part
                    row += part.num_rows
        except (pa.ArrowException, OSError) as err:
            why = _first_line(err)
            if "straddle" in why:
                why = (f"a row longer than the {self.block >> 20} MiB of text read at a time "
                       "(4 times the header row, at least 4 MiB)")
            raise TableError(f"{self.path}: cannot read it as {self.fmt} after data row {row} "
                             f"({why})") from None


def _csv_block(path: str, delimiter: str) -> int:
    """Bytes of CSV text parsed at a time: :data:`CSV_BLOCK`, or four times the header row
    when that is longer (a wide table's rows must fit in one block). A header row longer
    than :data:`CSV_MAX_HEADER`, or naming more than :data:`CSV_MAX_COLUMNS` columns, is
    refused (pyarrow infers every column's type when it opens a CSV: minutes for 10^6)."""
    head, found = b"", False
    with pa.input_stream(path, compression="detect") as f:
        while len(head) <= CSV_MAX_HEADER:
            chunk = f.read(1 << 20)
            cut = chunk.find(b"\n")
            head += chunk if cut < 0 else chunk[:cut + 1]
            if not chunk or cut >= 0:  # the end of the file, or of the header row
                found = True
                break
    if not found:
        raise TableError(f"{path}: its header row is longer than {CSV_MAX_HEADER >> 20} MiB: "
                         "write wide features as one column of lists, or as Parquet")
    row = next(csv.reader([head.decode("utf-8", errors="replace")], delimiter=delimiter), [])
    if len(row) > CSV_MAX_COLUMNS:
        raise TableError(f"{path}: its header row names {len(row):,} columns, more than the "
                         f"{CSV_MAX_COLUMNS:,} a CSV table may have: write wide features as "
                         "one column of lists, or as Parquet")
    return max(CSV_BLOCK, 4 * len(head))


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _plain(arr: pa.Array) -> pa.Array:
    """Dictionary-encoded values decoded, string views as strings."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_string_view(arr.type):
        arr = arr.cast(pa.large_string())
    return arr


def _is_text(arr: pa.Array) -> bool:
    return pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)


def _is_number(arr: pa.Array) -> bool:
    t = arr.type
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or \
        pa.types.is_decimal(t)


def _first_null(arr: pa.Array) -> int:
    return int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])


def _numbers(arr: pa.Array, fail: Callable[[int, str], Exception]) -> np.ndarray:
    """``arr`` as float32; ``fail(index, problem)`` builds the error for a missing value or
    text that is not a number."""
    arr = _plain(arr)
    if arr.null_count:
        raise fail(_first_null(arr), "missing value")
    if _is_text(arr):
        try:
            arr = pc.cast(arr, pa.float64())
        except pa.ArrowInvalid:
            for i, v in enumerate(arr.to_pylist()):
                try:
                    pc.cast(pa.array([v]), pa.float64())
                except pa.ArrowInvalid:
                    raise fail(i, f"{v!r} is not a number") from None
            raise
    elif not _is_number(arr):
        raise fail(0, f"holds {arr.type} values, not numbers")
    return arr.cast(pa.float64()).to_numpy(zero_copy_only=False).astype(np.float32)


def _lists(arr: pa.Array, parse_text: bool, fail: Callable[[int, str], Exception]
           ) -> pa.Array:
    """A column of lists: a list column, or (``parse_text``) text cells of numbers separated
    by spaces, commas or semicolons, optionally in brackets."""
    arr = _plain(arr)
    if arr.null_count:
        raise fail(_first_null(arr), "missing value")
    t = arr.type
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return arr
    if parse_text and _is_text(arr):
        text = pc.replace_substring_regex(pc.utf8_trim_whitespace(arr), r"^[\[(]\s*|\s*[\])]$",
                                          "")
        return pc.split_pattern_regex(text, r"[\s,;]+")
    raise fail(0, f"holds {t} values, not lists of numbers (features: a list of numeric "
               "columns, or one column of lists)")


def _feature_block(arr: pa.Array, as_list: bool, width: int | None,
                   fail: Callable[[int, str], Exception]) -> np.ndarray:
    """One feature column of a batch as ``[rows, width]`` float32."""
    arr = _plain(arr)
    listed = pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type) or \
        pa.types.is_fixed_size_list(arr.type)
    if not (as_list or listed):
        return _numbers(arr, fail).reshape(-1, 1)
    lists = _lists(arr, as_list, fail)
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    want = width if width is not None else (int(lengths[0]) if len(lengths) else 0)
    wrong = np.flatnonzero(lengths != want)
    if wrong.size:
        i = int(wrong[0])
        raise fail(i, f"a list of {int(lengths[i])} values, but the column's first row has "
                   f"{want}: every row needs the same number")
    ends = np.cumsum(lengths)
    flat = _numbers(pc.list_flatten(lists), lambda j, problem: fail(
        int(np.searchsorted(ends, j, side="right")), problem))
    return flat.reshape(len(lengths), want)


def _text_ints(arr: pa.Array) -> pa.Array | None:
    """A text column as int64 when every value is a plain integer that fits, else None."""
    if len(arr) and not pc.all(pc.match_substring_regex(arr, INT_TEXT)).as_py():
        return None
    try:
        return pc.cast(arr, pa.int64())
    except pa.ArrowInvalid:  # beyond int64
        return None


def _beyond_int64(arr: pa.Array) -> int | None:
    """The first value of a uint64 column that int64 cannot hold (>= 2^63), or None."""
    if not pa.types.is_uint64(arr.type) or not len(arr):
        return None
    big = np.flatnonzero(arr.fill_null(0).to_numpy(zero_copy_only=False) >= np.uint64(2**63))
    return int(big[0]) if big.size else None


def _exact(values: pa.Array) -> np.ndarray:
    """Strings as a numpy object array of Python ``str``: compared and sorted exactly (NUL
    characters included), unlike fixed-width numpy unicode."""
    return np.array(values.to_pylist(), dtype=object)


# ---- node tables ---------------------------------------------------------------------------


#: multiplier and mixer constants of :func:`text_hash` (FNV-1a's prime, splitmix64's)
_PRIME, _MIX1, _MIX2 = np.uint64(0x100000001B3), np.uint64(0xBF58476D1CE4E5B9), \
    np.uint64(0x94D049BB133111EB)


def text_hash(arr: pa.Array) -> np.ndarray:
    """A 64-bit hash (uint64) of every string of ``arr`` (no nulls), computed on its buffers
    with numpy: a polynomial over the bytes, mixed with the length, then splitmix64's
    finaliser. Memory: 8 bytes per byte of the strings hashed (hash a batch at a time)."""
    n = len(arr)
    if not n:
        return np.zeros(0, np.uint64)
    width = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    off = np.frombuffer(arr.buffers()[1], width)[arr.offset:arr.offset + n + 1].astype(np.int64)
    lengths = np.diff(off)
    h = lengths.astype(np.uint64) * _MIX2
    if off[-1] > off[0]:
        data = np.frombuffer(arr.buffers()[2], np.uint8)[off[0]:off[-1]].astype(np.uint64)
        pos = np.arange(off[-1] - off[0]) - np.repeat(off[:-1] - off[0], lengths)
        powers = np.cumprod(np.full(int(lengths.max()), _PRIME, np.uint64))  # wraps: mod 2^64
        filled = lengths > 0
        h[filled] += np.add.reduceat((data + np.uint64(1)) * powers[pos],
                                     (off[:-1] - off[0])[filled])
    h ^= h >> np.uint64(30)
    h *= _MIX1
    h ^= h >> np.uint64(27)
    h *= _MIX2
    return h ^ (h >> np.uint64(31))


class IdIndex:
    """The user's ids of one node type, sorted once for lookups: integer ids themselves;
    string ids by :func:`text_hash`, every hit compared with the string itself (and, should two
    of the type's ids share a hash, by the strings themselves, sorted as Python strings:
    exact, slower)."""

    def __init__(self, ids: np.ndarray | None, text: pa.Array | None) -> None:
        self.text = text  # string ids (large_string), None for integer ids
        if text is None:
            self._sort(ids)
        else:
            self._sort(np.concatenate([text_hash(text.slice(i, 1 << 20))
                                       for i in range(0, max(len(text), 1), 1 << 20)]))
        self.hashed = text is not None

    def _sort(self, keys: np.ndarray) -> None:
        self.order = np.argsort(keys, kind="stable")
        self.sorted = keys[self.order]

    def __len__(self) -> int:
        return len(self.sorted)

    def repeat(self) -> tuple[int, int] | None:
        """``(row, earlier row)`` of the first id that repeats an earlier one, or None."""
        same = np.flatnonzero(self.sorted[1:] == self.sorted[:-1])
        if self.hashed and same.size:
            equal = pc.equal(self.text.take(self.order[same]),
                             self.text.take(self.order[same + 1])).to_numpy(zero_copy_only=False)
            if not equal.all():  # two ids share a hash: index the strings themselves
                self.hashed = False
                self._sort(_exact(self.text))
                return self.repeat()
        if not same.size:
            return None
        later = self.order[same + 1]
        j = int(np.argmin(later))
        return int(later[j]), int(self.order[same[j]])

    def lookup(self, values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """``(type-local ids, found)`` of ``values`` (int64, or strings for string ids)."""
        if self.text is None:
            keys = values.to_numpy(zero_copy_only=False)
        elif self.hashed:
            values = values.cast(self.text.type)
            keys = text_hash(values)
        else:
            keys = _exact(values.cast(self.text.type))
        if not len(self.sorted):
            return np.zeros(len(keys), np.int64), np.zeros(len(keys), bool)
        pos = np.minimum(np.searchsorted(self.sorted, keys), len(self.sorted) - 1)
        local, found = self.order[pos], self.sorted[pos] == keys
        if self.hashed and found.any():
            found &= pc.equal(values, self.text.take(local)).to_numpy(zero_copy_only=False)
        return local, found


@dataclass
class NodePart:
    """One node type as read: the user's ids (internal order), features, labels, split."""

    type: str
    path: str
    id_column: str
    ids: np.ndarray | pa.Array  # int64, or the strings as read (NULs kept)
    index: IdIndex
    features: np.ndarray | None
    labels: np.ndarray | None  # int64, -1: unlabelled
    classes: np.ndarray | None  # class names (str objects, labels index them), None: integers
    split: np.ndarray | None  # int8 codes of SPLIT_WORDS


def read_nodes(cfg: NodeTableConfig, batch_rows: int) -> NodePart:
    """Read one node table (see the module docstring)."""
    fmt = table_format(cfg, "node table")
    table = Table(cfg.path, fmt, cfg.delimiter, batch_rows, cfg.nulls)
    feats = cfg.feature_columns
    wanted = {cfg.id: "id", **{c: "features" for c in feats}}
    if cfg.label:
        wanted[cfg.label] = "label"
    if cfg.split:
        wanted[cfg.split] = "split"
    table.require(wanted)
    text = fmt == "csv"
    ids, blocks, labels, splits = [], [], [], []
    widths: dict[str, int] = {}
    for first, batch in table.batches(list(wanted)):
        def at(column: str, first: int = first) -> Callable[[int, str], Exception]:
            return lambda i, problem: table_error(cfg.path, problem, first + i, column)

        arr = _plain(batch.column(cfg.id))
        if arr.null_count:
            raise at(cfg.id)(_first_null(arr), "missing id")
        if not (_is_text(arr) or pa.types.is_integer(arr.type)):
            raise at(cfg.id)(0, f"ids are {arr.type}: give integers or strings")
        big = _beyond_int64(arr)
        if big is not None:
            raise at(cfg.id)(big, f"id {arr[big].as_py()} is beyond the signed 64-bit range "
                             "that integer ids are kept in: store the ids as int64 or as "
                             "strings")
        ids.append(arr)
        if feats:
            cols = []
            for c in feats:
                block = _feature_block(batch.column(c), cfg.list_features and text,
                                       widths.get(c), at(c))
                widths.setdefault(c, block.shape[1])
                cols.append(block)
            blocks.append(cols[0] if len(cols) == 1 else np.hstack(cols))
        if cfg.label:
            labels.append(_plain(batch.column(cfg.label)))
        if cfg.split:
            splits.append(_split_codes(batch.column(cfg.split), at(cfg.split)))
    if not sum(len(c) for c in ids):
        raise table_error(cfg.path, f"no data rows: the {cfg.type!r} node table lists its "
                          "nodes, one per row under the header")
    id_arr, id_text = _id_values(ids, text)
    index = IdIndex(id_arr, id_text)
    repeat = index.repeat()
    if repeat is not None:
        row, earlier = repeat
        raise table_error(cfg.path, f"duplicate node id {_user_id(id_arr, id_text, row)!r} "
                          f"(also at row {earlier + 1})", row, cfg.id)
    ids_kept: np.ndarray | pa.Array = id_arr if id_text is None else id_text  # exact strings
    features = None
    if feats:
        width = sum(widths.values()) if widths else 0
        features = np.vstack(blocks) if blocks else np.zeros((0, width), np.float32)
    y, classes = (None, None) if not cfg.label else _labels(labels, text, cfg.path, cfg.label)
    split = None if not cfg.split else (np.concatenate(splits) if splits
                                        else np.zeros(0, np.int8))
    return NodePart(cfg.type, cfg.path, cfg.id, ids_kept, index, features, y, classes, split)


def _id_values(chunks: list[pa.Array], text: bool) -> tuple[np.ndarray | None, pa.Array | None]:
    """A node table's ids: ``(int64 ids, None)``, or ``(None, strings)`` for text that is not
    all plain integers (CSV) and Parquet strings."""
    if not chunks:
        return np.zeros(0, np.int64), None
    if pa.types.is_integer(chunks[0].type):
        return np.concatenate([c.cast(pa.int64()).to_numpy() for c in chunks]), None
    arr = pa.chunked_array([c.cast(pa.large_string()) for c in chunks]).combine_chunks()
    if text:
        ints = _text_ints(arr)
        if ints is not None:
            return ints.to_numpy(), None
    return None, arr


def _user_id(ids: np.ndarray | None, text: pa.Array | None, row: int) -> object:
    return text[row].as_py() if text is not None else ids[row].item()


def _split_codes(arr: pa.Array, fail: Callable[[int, str], Exception]) -> np.ndarray:
    """A batch of split values as int8 codes of :data:`SPLIT_WORDS` (empty: 0)."""
    arr = _plain(arr)
    if not _is_text(arr):
        raise fail(0, f"holds {arr.type} values: the split column holds train, val or test")
    words = pc.utf8_lower(pc.utf8_trim_whitespace(arr.cast(pa.large_string())))
    index = pc.index_in(words, value_set=pa.array(list(SPLIT_WORDS), pa.large_string()))
    unknown = np.flatnonzero(index.is_null().to_numpy(zero_copy_only=False)
                             & arr.is_valid().to_numpy(zero_copy_only=False))
    if unknown.size:
        i = int(unknown[0])
        raise fail(i, f"unknown split {arr[i].as_py()!r}: train, val or test expected (empty: "
                   "in no split)")
    codes = np.array(list(SPLIT_WORDS.values()), np.int8)
    return codes[pc.fill_null(index, 0).to_numpy(zero_copy_only=False)]


def _labels(chunks: list[pa.Array], text: bool, path: str, column: str
            ) -> tuple[np.ndarray, np.ndarray | None]:
    """Labels as int64 (-1: none) and, for class names, the sorted names they index."""
    if not chunks:
        return np.zeros(0, np.int64), None
    arr = pa.chunked_array(chunks).combine_chunks()
    if _is_text(arr):
        arr = arr.cast(pa.large_string())
        arr = pc.if_else(pc.equal(pc.utf8_trim_whitespace(arr), ""),
                         pa.scalar(None, pa.large_string()), arr)
        ints = _text_ints(arr.drop_null()) if text else None
        if ints is None and text:
            _refuse_fractions(arr, path, column)
        if ints is None:
            names = sorted(pc.unique(arr.drop_null()).to_pylist())
            index = pc.index_in(arr, value_set=pa.array(names, pa.large_string()))
            return pc.fill_null(index, -1).to_numpy(zero_copy_only=False).astype(np.int64), \
                np.array(names, dtype=object)
        arr = pc.cast(arr, pa.int64())
    elif pa.types.is_boolean(arr.type):
        arr = arr.cast(pa.int64())
    elif pa.types.is_floating(arr.type):
        vals = arr.to_numpy(zero_copy_only=False)
        bad = np.flatnonzero(~np.isnan(vals) & (vals != np.round(vals)))
        if bad.size:
            raise table_error(path, f"label {vals[bad[0]]!r} is not a class: labels are "
                              "integers or class names", int(bad[0]), column)
        arr = pc.cast(pc.if_else(pc.is_nan(arr), pa.scalar(None, arr.type), arr), pa.int64())
    elif not pa.types.is_integer(arr.type):
        raise table_error(path, f"labels are {arr.type}: give integers or class names",
                          column=column)
    y = pc.fill_null(arr.cast(pa.int64()), -1).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(y < -1)
    if bad.size:
        raise table_error(path, f"label {int(y[bad[0]])} is negative: classes are 0, 1, ... "
                          "(empty or -1: unlabelled)", int(bad[0]), column)
    return y.astype(np.int64), None


def _refuse_fractions(arr: pa.Array, path: str, column: str) -> None:
    """A CSV label column of numbers (every value one) with a fractional one (``1.5``) is
    refused naming its row: a column of numbers holds classes, not class names. Any other
    column that is not all plain integers holds class names."""
    try:
        vals = pc.cast(arr, pa.float64()).to_numpy(zero_copy_only=False)
    except pa.ArrowInvalid:  # some value is not a number: class names
        return
    given = arr.is_valid().to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(given & np.isfinite(vals) & (vals != np.round(vals)))
    if bad.size:
        i = int(bad[0])
        raise table_error(path, f"label {arr[i].as_py()!r} is not a class: labels are integers "
                          "or class names", i, column)


# ---- edge tables ---------------------------------------------------------------------------


def read_edges(cfg: EdgeTableConfig, parts: dict[str, NodePart], batch_rows: int
               ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """One edge table: ``[2, E]`` type-local (source, destination) ids, the weights and the
    edge features (``[E, D]``; None without ``features``)."""
    fmt = table_format(cfg, "edge table")
    table = Table(cfg.path, fmt, cfg.delimiter, batch_rows, cfg.nulls)
    feats = cfg.feature_columns
    wanted = {cfg.src: "src", cfg.dst: "dst", **{c: "features" for c in feats}}
    if cfg.weight:
        wanted[cfg.weight] = "weight"
    table.require(wanted)
    src_t, _, dst_t = cfg.type
    src, dst, weights, blocks = [], [], [], []
    widths: dict[str, int] = {}
    for first, batch in table.batches(list(wanted)):
        def at(column: str, first: int = first) -> Callable[[int, str], Exception]:
            return lambda i, problem: table_error(cfg.path, problem, first + i, column)

        src.append(_map_ids(batch.column(cfg.src), parts[src_t], at(cfg.src)))
        dst.append(_map_ids(batch.column(cfg.dst), parts[dst_t], at(cfg.dst)))
        if cfg.weight:
            weights.append(_numbers(batch.column(cfg.weight), at(cfg.weight)))
        if feats:
            cols = []
            for c in feats:
                block = _feature_block(batch.column(c), cfg.list_features and fmt == "csv",
                                       widths.get(c), at(c))
                widths.setdefault(c, block.shape[1])
                cols.append(block)
            blocks.append(cols[0] if len(cols) == 1 else np.hstack(cols))
    edges = np.stack([np.concatenate(src) if src else np.zeros(0, np.int64),
                      np.concatenate(dst) if dst else np.zeros(0, np.int64)])
    w = None
    if cfg.weight:
        w = np.concatenate(weights) if weights else np.zeros(0, np.float32)
    attr = None
    if feats:
        attr = np.vstack(blocks) if blocks else np.zeros((0, sum(widths.values())), np.float32)
    return edges, w, attr


def _map_ids(arr: pa.Array, part: NodePart, fail: Callable[[int, str], Exception]
             ) -> np.ndarray:
    """A batch of the user's ids of ``part``'s type as its internal ids; an id the node table
    lacks is named."""
    arr = _plain(arr)
    if arr.null_count:
        raise fail(_first_null(arr), "missing id")
    if not (_is_text(arr) or pa.types.is_integer(arr.type)):
        raise fail(0, f"ids are {arr.type}: give integers or strings")
    unknown = f"the {part.type!r} node table ({part.path}, column {part.id_column}) has no " \
        "such node"
    if part.index.text is not None:
        values = arr if _is_text(arr) else pc.cast(arr, pa.large_string())
    elif pa.types.is_integer(arr.type):
        big = _beyond_int64(arr)
        if big is not None:
            raise fail(big, f"unknown id {arr[big].as_py()!r}: {unknown}")
        values = arr.cast(pa.int64())
    else:
        plain = pc.match_substring_regex(arr, INT_TEXT).to_numpy(zero_copy_only=False)
        if not plain.all():
            i = int(np.flatnonzero(~plain)[0])
            raise fail(i, f"unknown id {arr[i].as_py()!r}: {unknown} (its ids are integers)")
        try:
            values = pc.cast(arr, pa.int64())
        except pa.ArrowInvalid:  # an integer beyond int64
            big = next(i for i, v in enumerate(arr.to_pylist())
                       if not -2**63 <= int(v) < 2**63)
            raise fail(big, f"unknown id {arr[big].as_py()!r}: {unknown}") from None
    local, found = part.index.lookup(values)
    if not found.all():
        i = int(np.flatnonzero(~found)[0])
        raise fail(i, f"unknown id {values[i].as_py()!r}: {unknown}")
    return local


# ---- building ------------------------------------------------------------------------------


def _split_ids(part: NodePart, ratios: tuple[float, float, int]) -> dict[str, torch.Tensor]:
    """A labelled type's split as type-local ids: its split column's (labelled nodes only),
    else a seeded random split of its labelled nodes."""
    y = torch.from_numpy(part.labels)
    if part.split is None:
        return ratio_split(y, *ratios)
    labelled = part.labels >= 0
    return {s: torch.from_numpy(np.flatnonzero((part.split == code) & labelled))
            for code, s in enumerate(SPLITS, start=1)}


def build_graph(parts: dict[str, NodePart], edges: dict[tuple[str, str, str], tuple],
                name: str, symmetrize: bool, add_reverse: bool,
                ratios: tuple[float, float, int], meta: dict) -> GraphStore:
    """The graph of the tables read: homogeneous for one node type with one edge type within
    it, else typed (see the module docstring)."""
    labelled = {t: p for t, p in parts.items() if p.labels is not None}
    num_classes = max([max(int(p.labels.max(initial=-1)) + 1,
                           0 if p.classes is None else len(p.classes))
                       for p in labelled.values()], default=0)
    splits = {t: _split_ids(p, ratios) for t, p in labelled.items()}
    if len(parts) == 1 and len(edges) == 1:
        (t, part), (et, (ei, w, attr)) = next(iter(parts.items())), next(iter(edges.items()))
        split = splits.get(t, {})
        return GraphStore.from_edge_index(
            torch.from_numpy(ei), len(part.ids), symmetrize=symmetrize,
            edge_weight=None if w is None else torch.from_numpy(w),
            edge_attr=None if attr is None else torch.from_numpy(attr),
            x=None if part.features is None else torch.from_numpy(part.features),
            y=None if part.labels is None else torch.from_numpy(part.labels),
            train_idx=split.get("train"), val_idx=split.get("val"), test_idx=split.get("test"),
            num_classes=num_classes, name=name, meta=meta, node_types=(t,), edge_types=(et,))
    typed_edges, weights, attrs = {}, {}, {}
    for et, (ei, w, attr) in edges.items():
        ei = torch.from_numpy(ei)
        w = None if w is None else torch.from_numpy(w)
        attr = None if attr is None else torch.from_numpy(attr)
        if et[0] == et[2] and symmetrize:
            ei = torch.cat([ei, ei.flip(0)], 1)
            w = None if w is None else torch.cat([w, w])
            attr = None if attr is None else torch.cat([attr, attr])
        typed_edges[et] = ei
        if w is not None:
            weights[et] = w
        if attr is not None:
            attrs[et] = attr
    if add_reverse:
        for (s, r, d), ei in list(typed_edges.items()):
            if s == d:
                continue
            rev = (d, REVERSE + r, s)
            if rev in typed_edges:
                raise ConfigError(f"add_reverse would add edge type {list(rev)}, which an edge "
                                  "table already has: rename that relation or set "
                                  "dataset.add_reverse=false")
            typed_edges[rev] = ei.flip(0)
            if (s, r, d) in weights:
                weights[rev] = weights[(s, r, d)]
            if (s, r, d) in attrs:
                attrs[rev] = attrs[(s, r, d)]
    return GraphStore.from_typed(
        {t: len(p.ids) for t, p in parts.items()}, typed_edges,
        features={t: torch.from_numpy(p.features) for t, p in parts.items()
                  if p.features is not None},
        y={t: torch.from_numpy(p.labels) for t, p in labelled.items()},
        train_idx={t: s["train"] for t, s in splits.items()},
        val_idx={t: s["val"] for t, s in splits.items()},
        test_idx={t: s["test"] for t, s in splits.items()},
        edge_weight=weights or None, edge_attr=attrs or None, num_classes=num_classes,
        name=name, meta=meta)


class TablesDataset(Dataset):
    """The user's node and edge tables (see the module docstring)."""

    def __init__(self, root: str = "data", feature_norm: str = "none", name: str | None = None,
                 schema: str | None = None, nodes: list | None = None,
                 edges: list | None = None, symmetrize: bool = True, add_reverse: bool = True,
                 train_ratio: float = 0.6, val_ratio: float = 0.2, split_seed: int = 0,
                 batch_rows: int = 1 << 16,
                 memory_budget: int | str | None = None) -> None:
        super().__init__(root, feature_norm, memory_budget)
        self.spec = TablesConfig(name=name, schema=schema, nodes=list(nodes or []),
                                 edges=list(edges or []), symmetrize=symmetrize,
                                 add_reverse=add_reverse, train_ratio=train_ratio,
                                 val_ratio=val_ratio, split_seed=split_seed,
                                 batch_rows=batch_rows)
        self.spec.check()
        self.nodes, self.edges = self.spec.tables()
        self._beside: dict[str, np.ndarray] = {}
        self._inferred = False

    @property
    def key(self) -> str:
        """The processed folder's name: the graph's name and a digest of its tables."""
        key = self.spec.key()
        if key is None:  # a table vanished since the check
            self.spec.tables()
            raise ConfigError("dataset=tables: a table changed while it was read")
        return key

    @property
    def source(self) -> str:
        """The schema file, or the dataset's name."""
        return str(Path(self.spec.schema).expanduser().resolve()) if self.spec.schema \
            else f"dataset {self.spec.graph_name}"

    def check(self, graph: GraphStore) -> None:
        """The usual checks; integer labels infer the class count (refused when absurd)."""
        check_task(graph, self.source, inferred_classes=self._inferred)

    def whole_bytes(self) -> int:
        """The tables' sizes on disk: read in batches, but the graph they make is built in
        memory."""
        return sum(Path(t.path).stat().st_size for t in (*self.nodes, *self.edges))

    def budget_hint(self) -> str:
        """Tables are gathered in memory: convert them to an ``.npz`` for a bounded run."""
        return ("dataset=tables builds the graph in memory: write its arrays to an .npz "
                "(dataset=custom streams it) or raise the budget")

    def beside(self) -> dict[str, np.ndarray]:
        """The user's ids and class names of every node type (``IdMap.files()``)."""
        return dict(self._beside)

    def read(self) -> tuple[dict[str, NodePart], dict[tuple[str, str, str], tuple]]:
        """Every node table, then every edge table mapped to internal ids."""
        rows = int(self.spec.batch_rows)
        parts = {n.type: read_nodes(n, rows) for n in self.nodes}
        edges = {tuple(e.type): read_edges(e, parts, rows) for e in self.edges}
        return parts, edges

    def process(self) -> GraphStore:
        """Read the tables into a graph and keep its id map for :meth:`beside`."""
        parts, edges = self.read()
        meta = {"source": self.source,
                "tables": [str(t.path) for t in (*self.nodes, *self.edges)]}
        spec = self.spec
        try:
            graph = build_graph(parts, edges, spec.graph_name, bool(spec.symmetrize),
                                bool(spec.add_reverse),
                                (float(spec.train_ratio), float(spec.val_ratio),
                                 int(spec.split_seed)), meta)
        except (TypeError, ValueError) as err:
            if isinstance(err, ConfigError):
                raise
            raise ConfigError(f"{self.source}: {err}") from None
        self._inferred = any(p.labels is not None and p.classes is None for p in parts.values())
        idmap = IdMap({t: p.ids for t, p in parts.items()},
                      classes={t: p.classes for t, p in parts.items() if p.classes is not None})
        self._beside = idmap.files()
        return graph
