"""Processing in bounded memory: large arrays go to disk in chunks, never whole into memory.

While a dataset is processed (:meth:`gnnscale.data.base.Dataset.load`) its large outputs are
written to a staging folder beside the processed copy (:class:`Stage`) and handed to
:func:`gnnscale.data.processed.save` as files, with their SHA-256 digests computed while they
were written, so no output array is ever held whole in memory, copied or re-read to hash:

* features are streamed row chunk by row chunk (from an ``.npz`` member,
  :func:`member_chunks`; from a CSV, :func:`csv_rows`), converted to float32, checked finite
  and row-normalised per chunk, into a ``.npy`` that the graph then memory-maps
  (:meth:`Stage.features`: ``x``, or ``x__<type>`` per node type);
* edge lists stay on disk (:class:`EdgeSource`: a ``.npy`` file or a stored ``.npz`` member
  read in place, a compressed member through two decompressing readers, a CSV parsed once in
  blocks and spilled as int64 pairs) and are read a chunk of edges at a time, and so are
  edge features (:class:`RowSource`: an ``.npz`` member's rows, in step with their edges);
* the CSC is built out of core from such chunks (:func:`external_csc`): one pass counts each
  destination's in-edges, a second appends every edge to the bucket file of its destination
  range (buckets sized to the memory budget), its feature row to the bucket's row file, then
  each bucket alone is sorted by (destination, edge type, source), deduplicated and appended
  to ``indices.npy`` (and ``edge_weight.npy``, ``type_per_edge.npy``, the rows gathered in
  that order to ``edge_attr.npy`` or, per edge type, ``edge_attr__<k>.npy``). The result is
  bit-identical to the in-memory :func:`gnnscale.data.graph.csc_order` (the same stable
  order, the first of repeated edges kept): within a bucket the edges keep their input order.
  The staged files are mapped shared and registered with :mod:`gnnscale.data.pages`, so the
  chunked checks give their pages back.

``dataset.memory_budget`` (bytes, or ``"8GB"``, ``"512MiB"``; every dataset option takes it)
bounds the working set: the per-node arrays (in-degrees, their sums, ``indptr``: 24 bytes a
node) plus a bucket of edges (about :data:`BYTES_PER_EDGE` bytes each, plus twice a feature
row) plus a chunk (an eighth of the budget at most). Without a budget the out-of-core build
is used once the edges pass
:data:`AUTO_EDGES` (a budget of a quarter of the indices, 64 MiB at least, then). A budget
that cannot hold the per-node arrays or one feature row is refused in one line naming what it
needs; a loader that must read its source whole (:attr:`Dataset.streams` false) refuses one
larger than the budget before reading it (:meth:`Dataset.check_budget`).
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import os
import shutil
import weakref
import zipfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO, Protocol

import numpy as np
import torch

from gnnscale.data import pages
from gnnscale.data.metadata import EDGE_ATTR, EDGE_ATTR_PREFIX, FEATURES_PREFIX
from gnnscale.data.schemas import parse_budget  # noqa: F401 (re-exported)
from gnnscale.errors import ConfigError

#: the CSC builders (this out-of-core one, and :func:`gnnscale.data.graph.build_csc` in memory)
#: sort on one combined int64 key while nodes x edge types x nodes is below this, else on
#: three keys (slower, never overflows)
KEY_LIMIT = 2 ** 63
#: working bytes per edge of a bucket being sorted (source, destination, key, sort output,
#: order, mask and the deduplicated copy, int64 each)
BYTES_PER_EDGE = 64
#: per-node bytes the out-of-core CSC keeps (in-degrees, their prefix sums, indptr; int64)
BYTES_PER_NODE = 24
#: edges (after symmetrising) from which the CSC is built out of core without a budget
AUTO_EDGES = 1 << 20
#: bytes of a read or written chunk (rows of features, edges of a pass)
CHUNK_BYTES = 32 << 20
#: feature tensors found finite while they were written (by id; the check skips them)
FINITE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()



class NpyWriter:
    """A ``.npy`` written chunk by chunk (C order) and hashed as it is written, so that
    :attr:`digest` equals :func:`gnnscale.data.processed.array_digest` of the whole array."""

    #: the array's digest, set by :meth:`close`
    digest: str

    def __init__(self, file: Path, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.file, self.shape, self.dtype = Path(file), tuple(int(s) for s in shape), \
            np.dtype(dtype)
        self._f = open(self.file, "wb")
        np.lib.format.write_array_header_1_0(
            self._f, {"descr": np.lib.format.dtype_to_descr(self.dtype),
                      "fortran_order": False, "shape": self.shape})
        self._hash = hashlib.sha256()
        self._hash.update(str((self.shape, self.dtype.str)).encode())
        self._written = 0

    def write(self, chunk: np.ndarray) -> None:
        """Append ``chunk`` (of this dtype; rows of the array in order)."""
        data = np.ascontiguousarray(chunk, dtype=self.dtype).reshape(-1).view(np.uint8)
        self._hash.update(data.data)
        self._f.write(data.data)
        self._written += data.size

    def close(self) -> str:
        """Finish the file (its size checked against the shape); returns the digest."""
        if self._f.closed and hasattr(self, "digest"):
            return self.digest
        self._f.close()
        expected = math.prod(self.shape) * self.dtype.itemsize
        if self._written != expected:
            raise ValueError(f"{self.file}: {self._written} bytes written for shape "
                             f"{self.shape} {self.dtype} ({expected} expected)")
        self.digest = self._hash.hexdigest()[:32]
        return self.digest


def row_normalized(features: torch.Tensor, norm: str, what: str) -> torch.Tensor:
    """Each row of ``features`` divided by its sum (``norm``: the option's name, for the
    error on negative values; rows are independent, so a chunk of rows gives the same: a
    dataset's whole matrix, :func:`gnnscale.data.base.normalize_features`, or one chunk
    written at a time, :meth:`Stage.features`)."""
    x = features.float()
    if bool((x < 0).any()):
        raise ValueError(f"dataset.feature_norm={norm} divides each feature row by its sum, "
                         f"which needs non-negative features (bag-of-words, TF-IDF); "
                         f"{what} has negative values: use dataset.feature_norm=none")
    total = x.sum(dim=1, keepdim=True)
    return torch.where(total == 0, x, x / torch.where(total == 0, 1.0, total)).to(features.dtype)


def file_digest(file: Path) -> str:
    """The digest of a ``.npy`` file's array read with plain reads (nothing mapped)."""
    with open(file, "rb") as f:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        shape, _, dtype = read(f)
        h = hashlib.sha256()
        h.update(str((tuple(shape), dtype.str)).encode())
        while block := f.read(CHUNK_BYTES):
            h.update(block)
    return h.hexdigest()[:32]


def member_chunks(zf: zipfile.ZipFile, info: zipfile.ZipInfo, start_row: int = 0,
                  chunk_bytes: int = CHUNK_BYTES) -> Iterator[np.ndarray]:
    """The rows of one ``.npz`` member (a C-order ``.npy``), a chunk of rows at a time,
    starting at ``start_row`` (a member is read, never mapped; compressed ones too)."""
    with zf.open(info) as f:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(f)
        if fortran and len(shape) > 1:
            raise ValueError("a Fortran-order member cannot be read by rows")
        rows = shape[0] if shape else 1
        row_shape = tuple(shape[1:])
        row_bytes = max(1, math.prod(row_shape) * dtype.itemsize)
        if start_row:
            f.seek(f.tell() + start_row * row_bytes)
        step = max(1, chunk_bytes // row_bytes)
        for r in range(start_row, rows, step):
            k = min(step, rows - r)
            data = f.read(k * row_bytes)
            if len(data) != k * row_bytes:
                raise EOFError(f"member {info.filename!r} ends after {r} of {rows} rows")
            yield np.frombuffer(data, dtype=dtype).reshape((k, *row_shape))


class StagedGraph(Protocol):
    """What :meth:`Stage.held` reads of a graph (a :class:`~gnnscale.data.graph.GraphStore`)."""

    type_features: dict[str, torch.Tensor]
    type_edge_attr: dict[tuple[str, str, str], torch.Tensor]
    edge_types: tuple[tuple[str, str, str], ...]


class Stage:
    """A dataset's staging folder while it is processed: large arrays written there as files
    (:attr:`files`: ``{array name: (file, digest)}``) that :func:`processed.save` moves into
    the processed copy instead of writing them again."""

    def __init__(self, folder: Path, feature_norm: str = "none",
                 memory_budget: int | None = None) -> None:
        self.folder, self.feature_norm, self.memory_budget = folder, feature_norm, memory_budget
        self.files: dict[str, tuple[Path, str]] = {}
        self.normalized: set[str] = set()  # arrays the feature transform was applied to
        self._address: dict[str, int] = {}  # where each file is mapped

    def mapped(self, name: str, writer: NpyWriter) -> torch.Tensor:
        """Close ``writer``, record its file as array ``name`` and memory-map it."""
        self.files[name] = (writer.file, writer.close())
        out = _shared_map(writer.file)
        self._address[name] = out.data_ptr()
        return out

    def held(self, graph: StagedGraph) -> dict[str, tuple[Path, str]]:
        """The staged files that ``graph`` still holds as they were written (its array of that
        name is the mapped file itself, not a transformed copy)."""
        out = {}
        for name, entry in self.files.items():
            if name.startswith(FEATURES_PREFIX):
                a = graph.type_features.get(name[len(FEATURES_PREFIX):])
            elif name.startswith(EDGE_ATTR_PREFIX):
                k = int(name[len(EDGE_ATTR_PREFIX):])
                a = graph.type_edge_attr.get(graph.edge_types[k]) \
                    if k < len(graph.edge_types) else None
            else:
                a = getattr(graph, name, None)
            if torch.is_tensor(a) and a.data_ptr() == self._address.get(name):
                out[name] = entry
        return out

    @property
    def chunk_bytes(self) -> int:
        """Bytes of a chunk read or written at a time (an eighth of the budget at most)."""
        return CHUNK_BYTES if self.memory_budget is None else \
            max(1 << 16, min(CHUNK_BYTES, self.memory_budget // 8))

    def features(self, chunks: Iterator[np.ndarray], rows: int, cols: int,
                 name: str = "x") -> torch.Tensor:
        """Row chunks of a feature matrix written as float32 ``[rows, cols]`` (the feature
        transform applied per chunk: rows are independent), memory-mapped. More or fewer
        rows than ``rows`` is a ValueError naming both."""
        if self.memory_budget is not None and 16 * cols > self.memory_budget // 4:
            raise ConfigError(f"dataset.memory_budget={self.memory_budget:,} bytes is too "
                              f"small to process {name}: one row of its {cols:,} features "
                              f"takes {16 * cols:,} bytes while it is converted; give at "
                              f"least {math.ceil(64 * cols / 2**20)}MiB")
        writer = NpyWriter(self.folder / f"{name}.npy", (rows, cols), np.dtype(np.float32))
        # NaN/Inf values, rows, first row: checked as it is written
        bad_values, bad_rows, first_bad = 0, 0, None
        try:
            done = 0
            for chunk in chunks:
                if done + len(chunk) > rows:
                    raise ValueError(f"{name} has more than {rows} rows, one per node expected")
                block = np.asarray(chunk.reshape(len(chunk), cols), dtype=np.float32)
                finite = np.isfinite(block)
                if not finite.all():
                    rows_bad = ~finite.all(axis=1)
                    bad_values += int((~finite).sum())
                    bad_rows += int(rows_bad.sum())
                    if first_bad is None:
                        first_bad = done + int(rows_bad.nonzero()[0][0])
                del finite
                done += len(block)
                if self.feature_norm != "none":
                    try:
                        block = row_normalized(torch.from_numpy(block.copy()),
                                               self.feature_norm, name).numpy()
                    except ValueError as err:  # negative values: one line, not "damaged"
                        raise ConfigError(str(err)) from None
                writer.write(block)
            if done != rows:
                raise ValueError(f"{name} has {done} rows for {rows} nodes: one row per node")
        except BaseException:
            writer._f.close()
            raise
        if first_bad is not None:
            writer.close()
            raise ConfigError(f"{name} holds {bad_values} NaN/Inf values in {bad_rows} rows "
                              f"(first: row {first_bad}); replace them, e.g. with 0 or the "
                              "column mean, before training")
        if self.feature_norm != "none":
            self.normalized.add(name)
        out = self.mapped(name, writer)
        FINITE[id(out)] = out  # checked while written: not read again
        trim()
        return out


@contextmanager
def staging(processed_dir: Path, feature_norm: str, memory_budget: int | None
            ) -> Iterator[Stage]:
    """A :class:`Stage` in a fresh folder beside ``processed_dir``, removed afterwards (one
    left by a killed process is swept by the next one)."""
    from gnnscale.data.publish import temp_folder

    folder = temp_folder(processed_dir.parent / "staging")
    try:
        yield Stage(folder, feature_norm, memory_budget)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def edge_rows(budget: int | None, attr_bytes: int = 0) -> int:
    """Edges per chunk of a pass over an edge stream under ``budget`` (``attr_bytes``: the
    bytes of an edge's feature row carried with it)."""
    budget = budget if budget is not None else 1 << 62
    return max(1 << 12, min(CHUNK_BYTES, budget // 8) // (48 + 3 * attr_bytes))


def budget_for(stage: Stage | None, num_edges: int) -> int | None:
    """The budget the out-of-core CSC runs under, or None for the in-memory build: the
    stage's budget when set, else a quarter of the indices once ``num_edges`` passes
    :data:`AUTO_EDGES`."""
    if stage is None:
        return None
    if stage.memory_budget is not None:
        return stage.memory_budget
    return max(64 << 20, num_edges * 8 // 4) if num_edges >= AUTO_EDGES else None


#: one chunk of an edge stream: sources, destinations, weights (or None), edge types (or
#: None), edge feature rows (or None)
Chunk = tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray | None]
#: edge features carried through the out-of-core build: ``(width, dtype)`` of one matrix (every
#: edge has a row), or ``{edge type id: (width, dtype)}`` (those types' edges have rows)
AttrSpec = tuple[int, np.dtype] | dict[int, tuple[int, np.dtype]] | None


def attr_row_bytes(attr: AttrSpec) -> int:
    """Bytes of the widest edge feature row ``attr`` describes (0 without)."""
    if attr is None:
        return 0
    specs = attr.values() if isinstance(attr, dict) else [attr]
    return max((int(w) * np.dtype(t).itemsize for w, t in specs), default=0)


def external_csc(edges: Callable[[], Iterator[Chunk]], num_nodes: int, symmetrize: bool,
                 self_loops: str, dedupe: bool, budget: int, folder: Path,
                 index_dtype: torch.dtype, weighted: bool = False, num_types: int = 1,
                 what: str = "graph", attr: AttrSpec = None
                 ) -> tuple[torch.Tensor, dict[str, torch.Tensor], dict[str, NpyWriter]]:
    """The CSC of an edge stream built out of core within ``budget`` bytes (see the module
    docstring): ``(indptr, per-edge arrays, files)``, the per-edge arrays (``indices``,
    ``edge_weight``, ``type_per_edge``, ``edge_attr`` or ``edge_attr__<type id>``)
    memory-mapped from ``folder``; ``files``: their closed writers (with digests) by name.
    ``edges()`` yields :data:`Chunk` s in input order and may be called several times
    (``weighted``: every chunk has weights; ``num_types`` > 1: every chunk has edge types,
    in-edges are then sorted by (edge type, source) as :func:`csc_order` sorts them;
    ``attr``: every chunk has feature rows for its edges (one matrix: ``(width, dtype)``), or,
    per type (``{type id: (width, dtype)}``), a chunk of one edge type has rows when its type
    has features; each row moves with its edge into CSC order, within its type).
    Same semantics as :meth:`GraphStore.from_edge_index`: ``symmetrize`` appends every
    reverse edge after all forward ones (with its row), ``self_loops`` keep/remove/add (added
    loops last, zero rows), ``dedupe`` keeps the first of repeated edges (of one type)."""
    n, k_types = num_nodes, max(1, int(num_types))
    nodes_bytes = BYTES_PER_NODE * (n + 1)
    row_bytes = attr_row_bytes(attr)
    chunk = edge_rows(budget, row_bytes)
    need = nodes_bytes + (48 + 3 * row_bytes) * chunk + (BYTES_PER_EDGE + 2 * row_bytes) * 1024
    if budget < need:
        raise ConfigError(f"dataset.memory_budget={budget:,} bytes is too small to process "
                          f"{what}: its {n:,} nodes alone need {nodes_bytes:,} bytes for the "
                          f"per-node arrays; give at least {math.ceil(need / 2**20)}MiB")
    if isinstance(attr, dict) and k_types == 1:
        raise ValueError("per-type edge features need edge types")
    build = _CscBuild(edges, n, symmetrize, self_loops, dedupe, weighted, k_types, attr, chunk)
    per_edge = BYTES_PER_EDGE + 2 * row_bytes + (16 if build.per_type else 0)
    cap = max(1024, (budget - nodes_bytes - (48 + 3 * row_bytes) * chunk) // per_edge)
    bounds = build.buckets(cap)  # pass 1
    trim()
    spill = folder / "csc_buckets"
    spill.mkdir(exist_ok=True)
    if len(bounds) > 2:  # pass 2
        build.spill(bounds, spill)
    trim()
    raws = {"indices": folder / "csc_indices.raw", "edge_weight": folder / "csc_weights.raw",
            "type_per_edge": folder / "csc_types.raw"}
    raws.update({name: folder / f"csc_{name}.raw" for name in build.slots})
    indptr, total, rows_of = build.write_buckets(bounds, spill, raws, index_dtype)  # pass 3
    shutil.rmtree(spill, ignore_errors=True)
    files, out = build.npy_files(raws, folder, total, rows_of, index_dtype)
    trim()
    return indptr, out, files


@dataclass(frozen=True)
class _CscBuild:
    """One :func:`external_csc` build: the edge stream and the options its passes share."""

    edges: Callable[[], Iterator[Chunk]]
    n: int
    symmetrize: bool
    self_loops: str
    dedupe: bool
    weighted: bool
    k_types: int
    attr: AttrSpec
    chunk: int  # edges per chunk

    @property
    def typed(self) -> bool:
        """Whether every chunk carries edge types (sorted by (type, source) per destination)."""
        return self.k_types > 1

    @property
    def per_type(self) -> bool:
        """Whether edge features are per edge type (``attr`` ``{type id: (width, dtype)}``)."""
        return isinstance(self.attr, dict)

    @property
    def one(self) -> tuple[int, np.dtype] | None:
        """``(width, dtype)`` of one edge feature matrix every edge has a row of, or None."""
        return self.attr if self.attr is not None and not isinstance(self.attr, dict) else None

    @property
    def slots(self) -> dict[str, tuple[int, np.dtype]]:
        """The edge feature arrays written, by name: ``(width, dtype)`` of each."""
        if isinstance(self.attr, dict):
            return {f"{EDGE_ATTR_PREFIX}{j}": spec for j, spec in self.attr.items()}
        return {} if self.attr is None else {EDGE_ATTR: self.attr}

    def stream(self) -> Iterator[Chunk]:
        """The edges as the CSC holds them, in input order: given (``symmetrize``: then every
        reverse edge), self loops removed (``remove``/``add``; ``add``: one per node last)."""
        n, weighted, typed, one = self.n, self.weighted, self.typed, self.one
        for flip in ([False, True] if self.symmetrize else [False]):
            for s, d, w, t, a in self.edges():
                s, d = np.asarray(s, dtype=np.int64), np.asarray(d, dtype=np.int64)
                w = None if not weighted else np.asarray(w, dtype=np.float32)
                t = None if not typed else np.asarray(t, dtype=np.int64)
                if a is not None:
                    if isinstance(self.attr, dict) and s.size and t is not None and \
                            (t[0] not in self.attr or (t != t[0]).any()):
                        raise ValueError("a chunk with edge feature rows holds edges of one "
                                         "featured type")
                    a = np.asarray(a).reshape(s.size, -1)
                elif one is not None:
                    raise ValueError("every chunk carries edge feature rows")
                if flip:
                    s, d = d, s
                if self.self_loops in ("remove", "add"):
                    keep = s != d
                    s, d = s[keep], d[keep]
                    w = None if w is None else w[keep]
                    t = None if t is None else t[keep]
                    a = None if a is None else a[keep]
                yield s, d, w, t, a
        if self.self_loops == "add":
            for b in range(0, n, self.chunk):
                loop = np.arange(b, min(n, b + self.chunk), dtype=np.int64)
                yield (loop, loop, np.ones(loop.size, np.float32) if weighted else None,
                       np.zeros(loop.size, np.int64) if typed else None,
                       None if one is None else np.zeros((loop.size, one[0]), one[1]))

    def buckets(self, cap: int) -> np.ndarray:
        """Pass 1: the bucket bounds, runs of destinations whose raw in-edges fit ``cap`` (one
        heavy vertex alone): ``[0, ..., n]``."""
        n = self.n
        counts = np.zeros(n, dtype=np.int64)  # raw in-degrees
        for _, d, _, _, _ in self.stream():
            counts += np.bincount(d, minlength=n)
        csum = np.cumsum(counts)
        del counts
        bounds, base = [0], 0
        while True:
            cut = max(int(np.searchsorted(csum, base + cap, side="right")), bounds[-1] + 1)
            if cut >= n:
                break
            bounds.append(cut)
            base = int(csum[cut - 1])
        bounds.append(n)
        return np.asarray(bounds, dtype=np.int64)

    def spill(self, bounds: np.ndarray, spill: Path) -> None:
        """Pass 2: every edge appended to its bucket's files in ``spill``, in input order
        (``<k>.sd`` records, ``<k>.w`` weights, ``<k>.a`` or ``<k>.a<type>`` feature rows)."""
        for s, d, w, t, a in self.stream():
            if not s.size:  # every edge of the chunk was a dropped self loop
                continue
            b = np.searchsorted(bounds, d, side="right") - 1
            order = np.argsort(b, kind="stable")
            b = b[order]
            rec = np.stack([s[order], d[order]] + ([t[order]] if t is not None else [])).T
            w = None if w is None else w[order]
            a = None if a is None else a[order]
            ak = "a" if a is None or t is None or not self.per_type else f"a{int(t[0])}"
            cuts = np.flatnonzero(np.diff(b)) + 1
            for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), b.size]):
                k = int(b[lo])
                with open(spill / f"{k}.sd", "ab") as f:
                    f.write(rec[lo:hi].tobytes())
                if w is not None:
                    with open(spill / f"{k}.w", "ab") as f:
                        f.write(w[lo:hi].tobytes())
                if a is not None:
                    with open(spill / f"{k}.{ak}", "ab") as f:
                        f.write(np.ascontiguousarray(a[lo:hi]).tobytes())
            del rec, a

    def write_buckets(self, bounds: np.ndarray, spill: Path, raws: dict[str, Path],
                      index_dtype: torch.dtype) -> tuple[torch.Tensor, int, dict[str, int]]:
        """Pass 3: each bucket sorted alone and appended to the ``raws`` files in order;
        ``(indptr, edges written, feature rows written per slot)``."""
        nb = len(bounds) - 1
        indptr = torch.zeros(self.n + 1, dtype=torch.int64)
        rows_of = dict.fromkeys(self.slots, 0)
        total = 0
        with ExitStack() as stack:
            out_f = {name: stack.enter_context(open(raw, "wb")) for name, raw in raws.items()}
            for k in range(nb):
                d0, d1 = int(bounds[k]), int(bounds[k + 1])
                held, wb, ab = self._spilled(k, spill) if nb > 1 else self._whole()
                rank = self._type_ranks(held[0])
                src, dst_local, tt, order = _bucket_sort(held, d0, d1 - d0, self.n,
                                                         self.k_types, self.dedupe)
                ptr = torch.zeros(d1 - d0 + 1, dtype=torch.int64)
                ptr[1:] = torch.cumsum(torch.bincount(dst_local, minlength=d1 - d0), 0)
                del dst_local
                indptr[d0 + 1:d1 + 1] = ptr[1:] + total
                total += src.numel()
                out_f["indices"].write(src.to(index_dtype).numpy().data)
                del src
                if wb is not None:
                    out_f["edge_weight"].write(wb[order].numpy().data)
                for name, rows in ab.items():
                    rows_of[name] += _write_rows(out_f[name], rows, order, rank, tt, name)
                del ab, rank
                if tt is not None:
                    out_f["type_per_edge"].write(tt.to(torch.int16).numpy().data)
                del order, wb, tt
                trim()
        return indptr, total, rows_of

    def _spilled(self, k: int, spill: Path
                 ) -> tuple[list[np.ndarray], torch.Tensor | None, dict[str, np.ndarray]]:
        """Bucket ``k`` read back from its spill files (removed once read): ``([records],
        weights or None, feature rows by slot)``, in input order."""
        cols = 3 if self.typed else 2
        sd_file = spill / f"{k}.sd"
        held = [np.fromfile(sd_file, dtype=np.int64).reshape(-1, cols)
                if sd_file.exists() else np.empty((0, cols), np.int64)]
        sd_file.unlink(missing_ok=True)
        wb = None
        if self.weighted:
            wf = spill / f"{k}.w"
            wb = torch.from_numpy(np.fromfile(wf, dtype=np.float32)) if wf.exists() \
                else torch.empty(0)
            wf.unlink(missing_ok=True)
        ab: dict[str, np.ndarray] = {}
        for name, (width, dt) in self.slots.items():
            af = spill / f"{k}.{'a' if not self.per_type else 'a' + name.rsplit('_', 1)[1]}"
            ab[name] = np.fromfile(af, dtype=dt).reshape(-1, width) if af.exists() \
                else np.empty((0, width), dt)
            af.unlink(missing_ok=True)
        return held, wb, ab

    def _whole(self) -> tuple[list[np.ndarray], torch.Tensor | None, dict[str, np.ndarray]]:
        """The one bucket of a build whose edges fit: the stream read whole, as
        :meth:`_spilled` returns a bucket."""
        parts = list(self.stream())
        cols = 3 if self.typed else 2
        rec = np.empty((sum(p[0].size for p in parts), cols), dtype=np.int64)
        a = 0
        for p in parts:
            rec[a:a + p[0].size, 0], rec[a:a + p[0].size, 1] = p[0], p[1]
            if p[3] is not None:  # typed
                rec[a:a + p[0].size, 2] = p[3]
            a += p[0].size
        wb = None
        if self.weighted:
            ws = [p[2] for p in parts if p[2] is not None]
            wb = torch.from_numpy(np.concatenate(ws) if parts else np.empty(0, np.float32))
        ab: dict[str, np.ndarray] = {}
        for name, (width, dt) in self.slots.items():
            j = None if not self.per_type else int(name.rsplit("_", 1)[1])
            got = [p[4] for p in parts if p[4] is not None and p[0].size and
                   (j is None or (p[3] is not None and int(p[3][0]) == j))]
            ab[name] = np.concatenate(got).reshape(-1, width).astype(dt, copy=False) \
                if got else np.empty((0, width), dt)
        return [rec], wb, ab

    def _type_ranks(self, rec: np.ndarray) -> np.ndarray | None:
        """With per-type edge features: each edge's row among its type's rows of the bucket
        whose records are ``rec`` (None otherwise)."""
        if not self.per_type:
            return None
        tcol = rec[:, 2]
        rank = np.zeros(tcol.size, dtype=np.int64)
        for name in self.slots:
            mine = np.flatnonzero(tcol == int(name.rsplit("_", 1)[1]))
            rank[mine] = np.arange(mine.size)
        return rank

    def npy_files(self, raws: dict[str, Path], folder: Path, total: int,
                  rows_of: dict[str, int], index_dtype: torch.dtype
                  ) -> tuple[dict[str, NpyWriter], dict[str, torch.Tensor]]:
        """The raw files this build fills as ``.npy`` files in ``folder``, mapped shared (the
        others removed): ``(writers, arrays)`` by name."""
        dtypes = {"indices": _np_dtype(index_dtype), "edge_weight": np.dtype(np.float32),
                  "type_per_edge": np.dtype(np.int16)}
        shapes: dict[str, tuple[int, ...]] = {name: (total,) for name in dtypes}
        for name, (width, dt) in self.slots.items():
            dtypes[name], shapes[name] = np.dtype(dt), (rows_of[name], int(width))
        keep = {"indices", *(["edge_weight"] if self.weighted else []),
                *(["type_per_edge"] if self.typed else []), *self.slots}
        files, out = {}, {}
        for name, raw in raws.items():
            if name in keep:
                files[name] = _npy_from_raw(raw, folder / f"{name}.npy", shapes[name],
                                            dtypes[name])
                out[name] = _shared_map(files[name].file)
            else:
                raw.unlink(missing_ok=True)
        return files, out


def _write_rows(f: BinaryIO, rows: np.ndarray, order: torch.Tensor, rank: np.ndarray | None,
                tt: torch.Tensor | None, name: str) -> int:
    """A bucket's feature rows of slot ``name`` (input order) written to ``f`` in CSC order
    (``order``: the input position of each CSC edge; with per-type rows, ``rank``: each edge's
    row among its type's, ``tt``: the CSC edges' types); returns the rows written."""
    on = order.numpy()
    if rank is not None and tt is not None:
        j = int(name.rsplit("_", 1)[1])
        rows = rows[rank[on[tt.numpy() == j]]]
    else:
        rows = rows[on]
    f.write(np.ascontiguousarray(rows).reshape(-1).view(np.uint8).data)
    return int(rows.shape[0])


def _bucket_sort(held: list[np.ndarray], d0: int, span: int, n: int, k: int, dedupe: bool
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """One bucket's edges in CSC order: ``held`` holds its ``[m, 2 or 3]`` (source,
    destination[, edge type]) records (taken out and freed as soon as the sort key is made);
    returns ``(sources, destinations less d0, edge types or None, input positions)``, sorted
    by (destination, edge type, source), the first of equal ones kept when ``dedupe``."""
    rec = held.pop()
    typed = rec.shape[1] == 3
    m = max(n, 1)
    if not typed or max(span, 1) * k * m < KEY_LIMIT:
        key = rec[:, 1] - d0  # the sort key, built in place: one int64 array an edge
        if typed:
            key *= k
            key += rec[:, 2]
        key *= m
        key += rec[:, 0]
        del rec
        skey, order = torch.sort(torch.from_numpy(key), stable=True)
        del key
        if dedupe and skey.numel():
            new = torch.ones_like(skey, dtype=torch.bool)
            new[1:] = skey[1:] != skey[:-1]
            skey, order = skey[new], order[new]
            del new
        src = skey % m
        skey.div_(m, rounding_mode="floor")
        if not typed:
            return src, skey, None, order
        t = skey % k
        skey.div_(k, rounding_mode="floor")
        return src, skey, t, order
    s, d, t = (torch.from_numpy(rec[:, j].copy()) for j in range(3))
    del rec
    order = torch.from_numpy(np.lexsort((s.numpy(), t.numpy(), d.numpy())))
    s, d, t = s[order], d[order] - d0, t[order]
    if dedupe and s.numel():
        new = torch.ones_like(s, dtype=torch.bool)
        new[1:] = (s[1:] != s[:-1]) | (d[1:] != d[:-1]) | (t[1:] != t[:-1])
        s, d, t, order = s[new], d[new], t[new], order[new]
    return s, d, t, order


def trim() -> None:
    """Give the heap pages freed by a pass back to the system (glibc keeps freed blocks below
    its mmap threshold, so a pass's arrays would otherwise stay resident); a no-op elsewhere."""
    global _LIBC
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL("libc.so.6")
            _LIBC.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _LIBC = False
    if isinstance(_LIBC, ctypes.CDLL):
        _LIBC.malloc_trim(0)


_LIBC: ctypes.CDLL | bool | None = None


def _shared_map(file: Path) -> torch.Tensor:
    """A staged ``.npy`` memory-mapped shared, registered so that the chunked checks give its
    pages back (:mod:`gnnscale.data.pages`; a shared mapping's pages are the file's)."""
    array = np.load(file, mmap_mode="r+")
    out = torch.from_numpy(array)
    pages.mapped(out, array)
    return out


def _np_dtype(dtype: torch.dtype) -> np.dtype:
    return torch.empty(0, dtype=dtype).numpy().dtype


def _npy_from_raw(raw: Path, file: Path, shape: tuple[int, ...], dtype: np.dtype
                  ) -> NpyWriter:
    """The raw bytes of a C-order array of ``shape`` prefixed with their ``.npy`` header
    (copied in chunks; the raw file is removed)."""
    writer = NpyWriter(file, shape, dtype)
    with open(raw, "rb") as f:
        while block := f.read(CHUNK_BYTES):
            writer.write(np.frombuffer(block, dtype=dtype))
    writer.close()
    os.unlink(raw)
    return writer


def staged_csc(stage: Stage, src: torch.Tensor, dst: torch.Tensor, w: torch.Tensor | None,
               num_nodes: int, symmetrize: bool, self_loops: str, dedupe: bool, budget: int,
               index_dtype: torch.dtype, what: str, attr: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """:func:`external_csc` of in-memory edge lists (and ``attr``: their ``[E, D]`` feature
    rows) into ``stage``: ``(indptr, indices, weights, edge features)``."""
    an = None if attr is None else attr.numpy()
    spec = None if an is None else (an.shape[1], an.dtype)
    chunk = edge_rows(budget, attr_row_bytes(spec))

    def edges() -> Iterator[Chunk]:
        s, d = src.numpy(), dst.numpy()
        wn = None if w is None else w.numpy()
        for a in range(0, s.size, chunk):
            yield (s[a:a + chunk], d[a:a + chunk], None if wn is None else wn[a:a + chunk],
                   None, None if an is None else an[a:a + chunk])
    indptr, out = stage_csc(stage, edges, num_nodes, symmetrize, self_loops, dedupe, budget,
                            index_dtype, w is not None, 1, what, spec)
    return indptr, out["indices"], out.get("edge_weight"), out.get("edge_attr")


def stage_csc(stage: Stage, edges: Callable[[], Iterator[Chunk]], num_nodes: int,
              symmetrize: bool, self_loops: str, dedupe: bool, budget: int,
              index_dtype: torch.dtype, weighted: bool, num_types: int, what: str,
              attr: AttrSpec = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """:func:`external_csc` into ``stage``: ``(indptr, per-edge arrays by name)``, their files
    recorded in the stage as the arrays they hold."""
    indptr, out, files = external_csc(
        edges, num_nodes, symmetrize, self_loops, dedupe, budget, stage.folder, index_dtype,
        weighted, num_types, what, attr)
    for name, tensor in out.items():
        stage.files[name] = (files[name].file, files[name].digest)
        stage._address[name] = tensor.data_ptr()
    return indptr, out


# ---- edge lists read in chunks -------------------------------------------------------------


def _npy_header(f) -> tuple[tuple[int, ...], bool, np.dtype]:
    version = np.lib.format.read_magic(f)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
        np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read(f)
    return tuple(int(s) for s in shape), bool(fortran), dtype


class EdgeSource:
    """A ``[2, E]`` (source, destination) id list on disk, read a chunk of edges at a time,
    never whole: a ``.npy`` file, an ``.npz`` member (a stored one read in place like a file,
    a compressed one through two decompressing readers, one per row) or edges spilled from a
    CSV (:meth:`csv`). :meth:`GraphStore.from_edge_index` and :meth:`GraphStore.from_typed`
    take one instead of an array: with a stage and a budget the CSC is built from its chunks,
    else :meth:`whole` reads it into memory as before."""

    def __init__(self, opener: Callable[[int], IO[bytes]], num_edges: int, dtype: np.dtype,
                 interleaved: bool, what: str) -> None:
        #: ``opener(byte offset into the array's data)``: a binary file positioned there
        self.opener, self.num_edges, self.dtype = opener, int(num_edges), np.dtype(dtype)
        self.interleaved, self.what = interleaved, what
        self._span: tuple[int, int, int, int] | None = None

    shape = property(lambda self: (2, self.num_edges))

    @classmethod
    def npy(cls, file: Path, what: str) -> EdgeSource:
        """The ``[2, E]`` array of a ``.npy`` file."""
        with open(file, "rb") as f:
            shape, fortran, dtype = _npy_header(f)
            base = f.tell()
        return cls._checked(lambda off: _at(open(file, "rb"), base + off), shape, fortran, dtype,
                            what)

    @classmethod
    def member(cls, path: Path, info: zipfile.ZipInfo, what: str) -> EdgeSource:
        """The ``[2, E]`` array of one ``.npz`` member (``info``: its zip entry)."""
        with zipfile.ZipFile(path) as zf, zf.open(info) as f:
            shape, fortran, dtype = _npy_header(f)
            header = f.tell()
        if info.compress_type == zipfile.ZIP_STORED:  # read in place: positioned file reads
            with open(path, "rb") as raw:
                raw.seek(info.header_offset)
                local = raw.read(30)
                start = info.header_offset + 30 + int.from_bytes(local[26:28], "little") + \
                    int.from_bytes(local[28:30], "little") + header
            return cls._checked(lambda off: _at(open(path, "rb"), start + off), shape, fortran,
                                dtype, what)

        def opener(off: int) -> IO[bytes]:
            zf = zipfile.ZipFile(path)
            f = zf.open(info)
            f.seek(header + off)  # forward: decompressed and skipped
            weakref.finalize(f, zf.close)  # closed once the reader is gone (alive meanwhile)
            return f
        return cls._checked(opener, shape, fortran, dtype, what)

    @classmethod
    def csv(cls, file: Path, folder: Path, what: str, block_bytes: int = 1 << 20
            ) -> EdgeSource:
        """The ``src,dst`` rows of a headerless (optionally gzipped) CSV, parsed once in blocks
        into ``folder`` as int64 pairs (16 bytes an edge on disk), then read from there."""
        import pyarrow as pa
        import pyarrow.csv as pa_csv

        raw = Path(folder) / f"edges-{len(list(Path(folder).glob('edges-*')))}.raw"
        opts = pa_csv.ReadOptions(autogenerate_column_names=True, block_size=block_bytes,
                              use_threads=False)
        conv = pa_csv.ConvertOptions(column_types={"f0": pa.int64(), "f1": pa.int64()})
        count = 0
        try:
            reader = pa_csv.open_csv(str(file), read_options=opts, convert_options=conv)
            if len(reader.schema) != 2:
                raise ValueError(f"{len(reader.schema)} columns, 2 expected (src,dst)")
            with open(raw, "wb") as out:
                for batch in reader:
                    pairs = np.empty((batch.num_rows, 2), dtype=np.int64)
                    pairs[:, 0] = batch.column(0).to_numpy(zero_copy_only=False)
                    pairs[:, 1] = batch.column(1).to_numpy(zero_copy_only=False)
                    out.write(pairs.tobytes())
                    count += batch.num_rows
        except (pa.ArrowException, ValueError) as err:
            raise ValueError(f"{file}: not a headerless numeric CSV of src,dst rows "
                             f"({str(err).splitlines()[0]})") from err
        pa.default_memory_pool().release_unused()  # the parser's blocks, kept by its pool
        trim()
        return cls(lambda off: _at(open(raw, "rb"), off), count, np.dtype(np.int64), True, what)

    @classmethod
    def _checked(cls, opener, shape, fortran: bool, dtype: np.dtype, what: str) -> EdgeSource:
        if len(shape) != 2 or shape[0] != 2:
            raise ValueError(f"{what} must have shape [2, E], got {tuple(shape)}")
        if dtype.kind not in "iu":
            raise TypeError(f"{what} must hold integer ids, got {dtype}")
        return cls(opener, shape[1], dtype, fortran, what)

    def chunks(self, rows: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(sources, destinations)`` as int64, ``rows`` edges at a time, in order."""
        size, e = self.dtype.itemsize, self.num_edges
        if self.interleaved:
            with self.opener(0) as f:
                for a in range(0, e, rows):
                    k = min(rows, e - a)
                    pairs = _read(f, self.dtype, 2 * k, self.what).reshape(k, 2)
                    yield pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.int64)
            return
        with self.opener(0) as fs, self.opener(e * size) as fd:
            for a in range(0, e, rows):
                k = min(rows, e - a)
                yield _read(fs, self.dtype, k, self.what).astype(np.int64), \
                    _read(fd, self.dtype, k, self.what).astype(np.int64)

    def span(self) -> tuple[int, int, int, int] | None:
        """``(least source, largest source, least destination, largest destination)`` (one
        pass, remembered); None without edges."""
        if self._span is None and self.num_edges:
            lo_s = lo_d = np.iinfo(np.int64).max
            hi_s = hi_d = np.iinfo(np.int64).min
            for s, d in self.chunks(CHUNK_BYTES // 64):
                lo_s, hi_s = min(lo_s, int(s.min())), max(hi_s, int(s.max()))
                lo_d, hi_d = min(lo_d, int(d.min())), max(hi_d, int(d.max()))
            if self.dtype.kind == "u" and self.dtype.itemsize == 8 and min(lo_s, lo_d) < 0:
                raise ValueError(f"{self.what} holds ids beyond int64: number the nodes "
                                 "densely from 0")
            self._span = (lo_s, hi_s, lo_d, hi_d)
            trim()
        return self._span

    def whole(self) -> torch.Tensor:
        """The whole ``[2, E]`` list as int64, in memory (the in-memory build)."""
        out = np.empty((2, self.num_edges), dtype=np.int64)
        a = 0
        for s, d in self.chunks(CHUNK_BYTES // 64):
            out[0, a:a + s.size], out[1, a:a + s.size] = s, d
            a += s.size
        return torch.from_numpy(out)


class RowSource:
    """The rows of an ``[E, D]`` (or ``[E]``) ``.npz`` member (edge features), read in order a
    chunk at a time and converted to ``dtype``, never whole: the out-of-core CSC build moves
    each row with its edge (:func:`external_csc`); :meth:`whole` reads it into memory for the
    in-memory build."""

    def __init__(self, path: Path, info: zipfile.ZipInfo, what: str,
                 dtype: np.dtype | type = np.float32) -> None:
        with zipfile.ZipFile(path) as zf, zf.open(info) as f:
            shape, fortran, stored = _npy_header(f)
        if len(shape) not in (1, 2) or (fortran and len(shape) == 2 and shape[1] > 1):
            raise ValueError(f"{what} must be a C-order [E, D] or [E] array, got "
                             f"{tuple(shape)}")
        self.path, self.info, self.what, self.dtype = Path(path), info, what, np.dtype(dtype)
        self.shape = (shape[0], shape[1] if len(shape) == 2 else 1)
        self._row_bytes = max(1, self.shape[1] * stored.itemsize)

    def chunks(self, rows: int) -> Iterator[np.ndarray]:
        """``[k, D]`` row chunks in order, ``rows`` at a time (fewer only in the last)."""
        with zipfile.ZipFile(self.path) as zf:
            for block in member_chunks(zf, self.info, chunk_bytes=rows * self._row_bytes):
                yield np.asarray(block.reshape(len(block), -1), dtype=self.dtype)

    def whole(self) -> torch.Tensor:
        """Every row, in memory, ``[E, D]``."""
        out = np.empty(self.shape, dtype=self.dtype)
        a = 0
        for block in self.chunks(max(1, CHUNK_BYTES // max(1, self.shape[1] * 8))):
            out[a:a + len(block)] = block
            a += len(block)
        return torch.from_numpy(out)


def _at(f, offset: int):
    f.seek(offset)
    return f


def _read(f, dtype: np.dtype, count: int, what: str) -> np.ndarray:
    data = f.read(count * dtype.itemsize)
    if len(data) != count * dtype.itemsize:
        raise EOFError(f"{what} ends early: the file is damaged")
    return np.frombuffer(data, dtype=dtype)


def csv_rows(file: Path, what: str, block_bytes: int = 1 << 20
             ) -> tuple[int, Iterator[np.ndarray]]:
    """``(columns, row chunks)`` of a headerless (optionally gzipped) numeric CSV, each chunk
    a float64 ``[k, columns]`` array (parsed as ``np.loadtxt`` parses, a block at a time)."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    opts = pa_csv.ReadOptions(autogenerate_column_names=True, block_size=block_bytes,
                              use_threads=False)
    try:
        first = pa_csv.open_csv(str(file), read_options=opts)
        names = list(first.schema.names)
        first.close()
    except pa.ArrowException as err:
        raise ValueError(f"{file}: not a headerless numeric CSV ({str(err).splitlines()[0]})"
                         ) from err
    conv = pa_csv.ConvertOptions(column_types={n: pa.float64() for n in names})

    def rows() -> Iterator[np.ndarray]:
        try:
            for batch in pa_csv.open_csv(str(file), read_options=opts, convert_options=conv):
                block = np.empty((batch.num_rows, len(names)), dtype=np.float64)
                for j in range(len(names)):
                    block[:, j] = batch.column(j).to_numpy(zero_copy_only=False)
                yield block
        except pa.ArrowException as err:
            raise ValueError(f"{file}: not a headerless numeric CSV of {what} "
                             f"({str(err).splitlines()[0]})") from err
        pa.default_memory_pool().release_unused()
    return len(names), rows()
