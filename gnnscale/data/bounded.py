"""Processing in bounded memory: large arrays go to disk in chunks, never whole into memory.

While a dataset is processed (:meth:`gnnscale.data.base.Dataset.load`) its large outputs are
written to a staging folder beside the processed copy (:class:`Stage`) and handed to
:func:`gnnscale.data.processed.save` as files, with their SHA-256 digests computed while they
were written, so no output array is ever held whole in memory, copied or re-read to hash:

* features read from an ``.npz`` member are streamed row chunk by row chunk
  (:func:`member_chunks`), converted to float32 and row-normalised per chunk, into a ``.npy``
  that the graph then memory-maps (:meth:`Stage.features`);
* the CSC is built out of core (:func:`external_csc`): one pass counts each destination's
  in-edges, a second appends every edge to the bucket file of its destination range (buckets
  sized to the memory budget), then each bucket alone is sorted by (destination, source),
  deduplicated and appended to ``indices.npy``. The result is bit-identical to the in-memory
  :func:`gnnscale.data.graph.csc_order` (the same stable order, the first of repeated edges
  kept): within a bucket the edges keep their input order.

``dataset.memory_budget`` (bytes, or ``"8GB"``, ``"512MiB"``) bounds the working set: the
per-node arrays (in-degrees, their sums, ``indptr``: 24 bytes a node) plus a bucket of edges (about
:data:`BYTES_PER_EDGE` bytes each) plus a chunk. Without a budget the out-of-core build is
used once the edges pass :data:`AUTO_EDGES` (a budget of a quarter of the indices then); a
budget that cannot hold the per-node arrays is refused in one line naming what it needs.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import weakref
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from gnnscale.data.graph import unique_first
from gnnscale.data.schemas import parse_budget  # noqa: F401 (re-exported)
from gnnscale.errors import ConfigError

#: working bytes per edge of a bucket being sorted (source, destination, key, sort output,
#: order, mask and the deduplicated copy, int64 each)
BYTES_PER_EDGE = 64
#: per-node bytes the out-of-core CSC keeps (in-degrees, their prefix sums, indptr; int64)
BYTES_PER_NODE = 24
#: edges (after symmetrising) from which the CSC is built out of core without a budget
AUTO_EDGES = 1 << 22
#: bytes of a read or written chunk (rows of features, edges of a pass)
CHUNK_BYTES = 32 << 20
#: feature tensors found finite while they were written (by id; the check skips them)
FINITE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

EdgeChunks = Callable[[], Iterator[tuple[np.ndarray, np.ndarray]]]


class NpyWriter:
    """A ``.npy`` written chunk by chunk (C order) and hashed as it is written, so that
    :attr:`digest` equals :func:`gnnscale.data.processed.array_digest` of the whole array."""

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
        self._hash.update(memoryview(data))
        self._f.write(memoryview(data))
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
        out = torch.from_numpy(np.load(writer.file, mmap_mode="r+"))
        self._address[name] = out.data_ptr()
        return out

    def held(self, graph) -> dict[str, tuple[Path, str]]:
        """The staged files that ``graph`` still holds as they were written (its array of that
        name is the mapped file itself, not a transformed copy)."""
        out = {}
        for name, entry in self.files.items():
            a = getattr(graph, name, None)
            if torch.is_tensor(a) and a.data_ptr() == self._address.get(name):
                out[name] = entry
        return out

    def features(self, chunks: Iterator[np.ndarray], rows: int, cols: int,
                 name: str = "x") -> torch.Tensor:
        """Row chunks of a feature matrix written as float32 ``[rows, cols]`` (the feature
        transform applied per chunk: rows are independent), memory-mapped."""
        from gnnscale.data.base import row_normalized

        writer = NpyWriter(self.folder / f"{name}.npy", (rows, cols), np.dtype(np.float32))
        bad = [0, 0, None]  # NaN/Inf values, rows, first row: checked as it is written
        try:
            done = 0
            for chunk in chunks:
                block = np.asarray(chunk.reshape(len(chunk), cols), dtype=np.float32)
                finite = np.isfinite(block)
                if not finite.all():
                    rows_bad = ~finite.all(axis=1)
                    bad[0] += int((~finite).sum())
                    bad[1] += int(rows_bad.sum())
                    bad[2] = done + int(rows_bad.nonzero()[0][0]) if bad[2] is None else bad[2]
                del finite
                done += len(block)
                if self.feature_norm != "none":
                    try:
                        block = row_normalized(torch.from_numpy(block.copy()),
                                               self.feature_norm, name).numpy()
                    except ValueError as err:  # negative values: one line, not "damaged"
                        raise ConfigError(str(err)) from None
                writer.write(block)
        except BaseException:
            writer._f.close()
            raise
        if bad[2] is not None:
            writer.close()
            raise ConfigError(f"{name} holds {bad[0]} NaN/Inf values in {bad[1]} rows (first: "
                              f"row {bad[2]}); replace them, e.g. with 0 or the column mean, "
                              "before training")
        if self.feature_norm != "none":
            self.normalized.add(name)
        out = self.mapped(name, writer)
        FINITE[id(out)] = out  # checked while written: not read again
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


def tensor_chunks(src: torch.Tensor, dst: torch.Tensor, chunk: int) -> EdgeChunks:
    """Edge chunks of in-memory (source, destination) lists, as :func:`external_csc` reads."""
    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        s, d = src.numpy(), dst.numpy()
        for a in range(0, s.size, chunk):
            yield s[a:a + chunk], d[a:a + chunk]
    return chunks


def budget_for(stage: Stage | None, num_edges: int) -> int | None:
    """The budget the out-of-core CSC runs under, or None for the in-memory build: the
    stage's budget when set, else a quarter of the indices once ``num_edges`` passes
    :data:`AUTO_EDGES`."""
    if stage is None:
        return None
    if stage.memory_budget is not None:
        return stage.memory_budget
    return max(64 << 20, num_edges * 8 // 4) if num_edges >= AUTO_EDGES else None


def external_csc(edges: EdgeChunks, num_nodes: int, symmetrize: bool, self_loops: str,
                 dedupe: bool, budget: int, folder: Path, index_dtype: torch.dtype,
                 weights: Callable[[], Iterator[np.ndarray]] | None = None, what: str = "graph"
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None,
                            tuple[NpyWriter, NpyWriter | None]]:
    """The CSC of an edge stream built out of core within ``budget`` bytes (see the module
    docstring): ``(indptr, indices, weights or None, writers)``, the indices (and weights)
    memory-mapped from ``folder``; ``writers`` are the closed files with their digests.
    ``edges()`` yields (source, destination) chunks in input order and may be called
    several times; ``weights()``, when given, the per-edge weights alongside.
    Same semantics as :meth:`GraphStore.from_edge_index`: ``symmetrize`` appends every
    reverse edge after all forward ones, ``self_loops`` keep/remove/add (added loops last),
    ``dedupe`` keeps the first of repeated edges."""
    n = num_nodes
    nodes_bytes = BYTES_PER_NODE * (n + 1)
    chunk = max(1 << 12, min(CHUNK_BYTES, budget // 8) // 48)
    if budget < nodes_bytes + 48 * chunk + BYTES_PER_EDGE * 1024:
        need = nodes_bytes + 48 * chunk + BYTES_PER_EDGE * 1024
        raise ConfigError(f"dataset.memory_budget={budget:,} bytes is too small to process "
                          f"{what}: its {n:,} nodes alone need {nodes_bytes:,} bytes for the "
                          f"per-node arrays; give at least {math.ceil(need / 2**20)}MiB")

    def stream() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
        wit = weights() if weights is not None else None
        passes = [(False,), (True,)] if symmetrize else [(False,)]
        for (flip,) in passes:
            wit = weights() if weights is not None and flip else wit
            for s, d in edges():
                w = None if wit is None else np.asarray(next(wit), dtype=np.float32)
                s, d = np.asarray(s, dtype=np.int64), np.asarray(d, dtype=np.int64)
                if flip:
                    s, d = d, s
                if self_loops in ("remove", "add"):
                    keep = s != d
                    s, d, w = s[keep], d[keep], None if w is None else w[keep]
                yield s, d, w
        if self_loops == "add":
            for a in range(0, n, chunk):
                loop = np.arange(a, min(n, a + chunk), dtype=np.int64)
                yield loop, loop, None if weights is None else np.ones(loop.size, np.float32)

    counts = np.zeros(n, dtype=np.int64)  # pass 1: raw in-degrees
    for _, d, _ in stream():
        counts += np.bincount(d, minlength=n)
    cap = max(1024, (budget - nodes_bytes - 48 * chunk) // BYTES_PER_EDGE)
    # buckets: runs of destinations whose raw in-edges fit ``cap`` (one heavy vertex alone)
    csum = np.cumsum(counts)
    bounds, base = [0], 0
    while True:
        cut = max(int(np.searchsorted(csum, base + cap, side="right")), bounds[-1] + 1)
        if cut >= n:
            break
        bounds.append(cut)
        base = int(csum[cut - 1])
    bounds.append(n)
    bounds = np.asarray(bounds, dtype=np.int64)
    del csum
    del counts
    nb = len(bounds) - 1
    spill = folder / "csc_buckets"
    spill.mkdir(exist_ok=True)
    if nb > 1:  # pass 2: every edge appended to its bucket's file, in input order
        for s, d, w in stream():
            b = np.searchsorted(bounds, d, side="right") - 1
            order = np.argsort(b, kind="stable")
            b, s, d = b[order], s[order], d[order]
            w = None if w is None else w[order]
            cuts = np.flatnonzero(np.diff(b)) + 1
            for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), b.size]):
                k = int(b[lo])
                with open(spill / f"{k}.sd", "ab") as f:
                    f.write(np.stack([s[lo:hi], d[lo:hi]]).T.tobytes())
                if w is not None:
                    with open(spill / f"{k}.w", "ab") as f:
                        f.write(w[lo:hi].tobytes())
    indptr = torch.zeros(n + 1, dtype=torch.int64)
    ind_file = folder / "csc_indices.raw"
    w_file = folder / "csc_weights.raw"
    total = 0
    with open(ind_file, "wb") as fi, open(w_file, "wb") as fw:
        for k in range(nb):  # pass 3: each bucket sorted alone, appended in order
            d0, d1 = int(bounds[k]), int(bounds[k + 1])
            if nb > 1:
                sd_file = spill / f"{k}.sd"
                sd = np.fromfile(sd_file, dtype=np.int64).reshape(-1, 2) if sd_file.exists() \
                    else np.empty((0, 2), np.int64)
                s, d = torch.from_numpy(sd[:, 0].copy()), torch.from_numpy(sd[:, 1] - d0)
                del sd
                sd_file.unlink(missing_ok=True)
                wb = None
                if weights is not None:
                    wf = spill / f"{k}.w"
                    wb = torch.from_numpy(np.fromfile(wf, dtype=np.float32)) if wf.exists() \
                        else torch.empty(0)
                    wf.unlink(missing_ok=True)
            else:
                parts = list(stream())
                s = torch.from_numpy(np.concatenate([p[0] for p in parts]) if parts
                                     else np.empty(0, np.int64))
                d = torch.from_numpy(np.concatenate([p[1] for p in parts]) if parts
                                     else np.empty(0, np.int64))
                wb = None if weights is None else torch.from_numpy(
                    np.concatenate([p[2] for p in parts]) if parts else np.empty(0, np.float32))
                del parts
            key = d * max(n, 1) + s  # the in-memory build's key, less d0 * n
            del s, d
            key, order = unique_first(key) if dedupe else torch.sort(key, stable=True)
            src = key % max(n, 1)
            ptr = torch.zeros(d1 - d0 + 1, dtype=torch.int64)
            ptr[1:] = torch.cumsum(torch.bincount(key // max(n, 1), minlength=d1 - d0), 0)
            del key
            indptr[d0 + 1:d1 + 1] = ptr[1:] + total
            total += src.numel()
            fi.write(src.to(index_dtype).numpy().tobytes())
            if wb is not None:
                fw.write(wb[order].numpy().tobytes())
            del src, order, wb
    shutil.rmtree(spill, ignore_errors=True)
    ind = _npy_from_raw(ind_file, folder / "indices.npy", total, index_dtype)
    wts = _npy_from_raw(w_file, folder / "edge_weight.npy", total, torch.float32) \
        if weights is not None else None
    w_file.unlink(missing_ok=True)
    indices = torch.from_numpy(np.load(ind.file, mmap_mode="r+"))
    w = None if wts is None else torch.from_numpy(np.load(wts.file, mmap_mode="r+"))
    return indptr, indices, w, (ind, wts)


def _npy_from_raw(raw: Path, file: Path, count: int, dtype: torch.dtype) -> NpyWriter:
    """The raw bytes of ``count`` values prefixed with their ``.npy`` header (copied in chunks;
    the raw file is removed)."""
    np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    writer = NpyWriter(file, (count,), np_dtype)
    with open(raw, "rb") as f:
        while block := f.read(CHUNK_BYTES):
            writer.write(np.frombuffer(block, dtype=np.uint8).view(np_dtype))
    writer.close()
    os.unlink(raw)
    return writer


def staged_csc(stage: Stage, src: torch.Tensor, dst: torch.Tensor, w: torch.Tensor | None,
               num_nodes: int, symmetrize: bool, self_loops: str, dedupe: bool, budget: int,
               index_dtype: torch.dtype, what: str
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """:func:`external_csc` of in-memory edge lists into ``stage`` (its files recorded as
    ``indices`` and ``edge_weight``)."""
    chunk = max(1 << 12, min(CHUNK_BYTES, budget // 8) // 48)
    weights = None
    if w is not None:
        def weights() -> Iterator[np.ndarray]:
            wn = w.numpy()
            for a in range(0, wn.size, chunk):
                yield wn[a:a + chunk]
    indptr, indices, wts, (ind, wfile) = external_csc(
        tensor_chunks(src, dst, chunk), num_nodes, symmetrize, self_loops, dedupe, budget,
        stage.folder, index_dtype, weights, what)
    stage.files["indices"] = (ind.file, ind.digest)
    stage._address["indices"] = indices.data_ptr()
    if wfile is not None:
        stage.files["edge_weight"] = (wfile.file, wfile.digest)
        stage._address["edge_weight"] = wts.data_ptr()
    return indptr, indices, wts
