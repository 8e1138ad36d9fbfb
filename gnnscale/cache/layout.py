"""Locality orders of the feature file, so that rows read together share a block.

A mini-batch's input rows are a seed's neighbourhood: in the file's own order (the dataset's
ids) they fall in distinct blocks. :func:`locality_order` orders the vertices so neighbours
lie close together: ``bfs`` (a level-synchronous breadth-first walk of the CSC from the
highest-degree vertex of each component, a vertex's discoveries kept in its own order),
``degree`` (out-degree, highest first: the hot rows together) or ``none``; given a partition
map, the parts come first and the order applies within each part. :func:`derived_copy` writes
the processed ``x.npy`` in that order (and, for ``cache.feature_dtype``, as 16-bit floats) once,
beside the processed folder (``<processed>/../derived-features/<order>-<dtype>-<checksum>/``
with the order as ``order.npy``; a file lock makes one rank write it while the others wait;
its rows start on a 4 KiB boundary, so a row that divides a block never straddles two),
and the disk tier reads it through the inverse permutation
(:class:`~gnnscale.cache.disk.DiskTier` ``index``): users and outputs keep their ids.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path

import numpy as np
import torch

from gnnscale.cache.disk import DiskTier
from gnnscale.data.graph import GraphStore

__all__ = ["DTYPES", "ORDERS", "derived_copy", "locality_order", "open_copy", "rows_per_read"]

ORDERS = ("none", "degree", "bfs")
_CHUNK_ROWS = 1 << 16


def _bfs(indptr: torch.Tensor, indices: torch.Tensor, degree: torch.Tensor) -> torch.Tensor:
    n = indptr.numel() - 1
    seen = torch.zeros(n, dtype=torch.bool)
    order = []
    starts = torch.argsort(degree, descending=True, stable=True)
    k = 0
    while k < n:
        while k < n and bool(seen[starts[k]]):
            k += 1
        if k == n:
            break
        frontier = starts[k:k + 1]
        seen[frontier] = True
        while frontier.numel():
            order.append(frontier)
            lo, hi = indptr[frontier], indptr[frontier + 1]
            counts = hi - lo
            total = int(counts.sum())
            if total == 0:
                break
            base = torch.repeat_interleave(lo - torch.cumsum(counts, 0) + counts, counts)
            nbrs = indices[base + torch.arange(total)].long()
            nbrs = nbrs[~seen[nbrs]]
            if nbrs.numel() == 0:
                break
            uniq, first = _first_occurrence(nbrs)
            frontier = uniq[torch.argsort(first)]  # in the order they were discovered
            seen[frontier] = True
    return torch.cat(order) if order else torch.empty(0, dtype=torch.long)


def _first_occurrence(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The distinct values of ``x`` and the position of each one's first occurrence."""
    uniq, inverse = torch.unique(x, return_inverse=True)
    first = torch.full((uniq.numel(),), x.numel(), dtype=torch.long)
    first.scatter_reduce_(0, inverse, torch.arange(x.numel()), reduce="amin")
    return uniq, first


def locality_order(graph: GraphStore, order: str, part: torch.Tensor | None = None
                   ) -> torch.Tensor:
    """The vertices in ``order`` (``ORDERS``; module docstring): ``result[k]`` is the vertex
    stored at row ``k``; with ``part`` (vertex -> part) the parts come first, in part order."""
    if order not in ORDERS:
        raise ValueError(f"cache.disk_order must be one of {', '.join(ORDERS)}, got {order!r}")
    n = graph.num_nodes
    degree = graph.out_degree().long()
    if order == "none":
        ranked = torch.arange(n)
    elif order == "degree":
        ranked = torch.argsort(degree, descending=True, stable=True)
    else:
        ranked = _bfs(graph.indptr.long(), graph.indices, degree)
    if part is None:
        return ranked
    p = torch.as_tensor(part).long()[ranked]
    return ranked[torch.argsort(p, stable=True)]


DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _numpy(rows: torch.Tensor) -> np.ndarray:
    """``rows`` as numpy: a 16-bit float's bits as int16 (numpy has no bfloat16)."""
    if rows.dtype in (torch.float16, torch.bfloat16):
        return rows.view(torch.int16).numpy()
    return rows.numpy()


def _aligned_npy(path: Path, dtype: np.dtype, shape: tuple[int, ...],
                 align: int = 4096) -> np.memmap:
    """A new ``.npy`` file of ``shape`` whose data starts at byte ``align`` (its header padded
    with spaces, as the format allows), mapped for writing: with rows that divide a block, no
    row straddles two blocks."""
    head = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
            "shape": shape}
    text = repr(head).encode("latin1")
    prefix = np.lib.format.MAGIC_PREFIX + bytes([1, 0])
    room = align - len(prefix) - 2
    if len(text) + 1 > room:
        raise ValueError(f"a .npy header of {len(text)} bytes does not fit in {align}")
    body = text + b" " * (room - len(text) - 1) + b"\n"
    with open(path, "wb") as f:
        f.write(prefix + len(body).to_bytes(2, "little") + body)
        f.truncate(align + int(np.prod(shape)) * np.dtype(dtype).itemsize)
    return np.memmap(path, dtype=dtype, mode="r+", offset=align, shape=shape)


def open_copy(path: str | os.PathLike, dtype: torch.dtype) -> torch.Tensor:
    """A copy written by :func:`derived_copy`, memory-mapped copy-on-write as ``dtype``."""
    return torch.from_numpy(np.load(path, mmap_mode="c", allow_pickle=False)).view(dtype)


def derived_copy(graph: GraphStore, order: str = "none", dtype: torch.dtype | None = None,
                 part: torch.Tensor | None = None) -> tuple[Path, torch.Tensor | None]:
    """The processed features of ``graph`` (loaded from its processed folder) written once in
    ``order`` and as ``dtype`` (rounded to nearest; a 16-bit type's bits stored as int16),
    beside the processed folder (later calls, and other ranks, reuse it), and the index
    ``id -> row`` of that file (None in the file's own order)."""
    folder = graph.meta.get("processed_dir")
    if not folder or graph.x is None:
        raise ValueError("cache.disk_order and cache.feature_dtype write a copy of the "
                         "processed feature file: load the dataset from its processed folder")
    x = graph.x
    dtype = x.dtype if dtype is None else dtype
    tag = "" if part is None else "-parts" + hashlib.sha256(
        torch.as_tensor(part).long().numpy().tobytes()).hexdigest()[:12]
    kind = str(dtype).replace("torch.", "")
    out = (Path(folder).parent / "derived-features" /
           f"{order}{tag}-{kind}-{graph.meta.get('checksum', 'x')}")
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "x.npy").exists():
            ranked = None if order == "none" else locality_order(graph, order, part)
            if ranked is not None:
                np.save(out / "order.npy", ranked.numpy())
            tmp = out / f"x.{os.getpid()}.npy"
            first = _numpy(x[:1].to(dtype))
            dst = _aligned_npy(tmp, first.dtype, tuple(x.shape))
            for k in range(0, x.shape[0], _CHUNK_ROWS):
                rows = x[k:k + _CHUNK_ROWS] if ranked is None else x[ranked[k:k + _CHUNK_ROWS]]
                dst[k:k + rows.shape[0]] = _numpy(rows.to(dtype))
            dst.flush()
            del dst
            os.replace(tmp, out / "x.npy")
        if not (out / "order.npy").exists():
            return out / "x.npy", None
        ranked = torch.from_numpy(np.load(out / "order.npy"))
    index = torch.empty_like(ranked)
    index[ranked] = torch.arange(ranked.numel())
    return out / "x.npy", index


def rounded_copy(table: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``table`` rounded to ``dtype`` (to nearest). A table memory-mapped from a file (a part
    folder's rows) is written once beside its folder
    (``<folder>/../derived-features/none-<dtype>-<file>-<key>/x.npy``, rows from 4 KiB; the key
    hashes the file's path, size and mtime, so a changed file gets a new copy; one process
    writes it under a file lock, the others map it) and mapped; any other table, or one whose
    folder is read-only, is rounded in memory."""
    from gnnscale.cache.disk import mapped_file

    where = mapped_file(table) if table.dim() == 2 else None
    if where is None:
        return table.to(dtype)
    path, offset = Path(where[0]), where[1]
    st = path.stat()
    key = hashlib.sha256(f"{path}:{offset}:{st.st_size}:{st.st_mtime_ns}:"
                         f"{tuple(table.shape)}:{table.dtype}".encode()).hexdigest()[:12]
    kind = str(dtype).replace("torch.", "")
    out = path.parent.parent / "derived-features" / f"none-{kind}-{path.stem}-{key}"
    try:
        out.mkdir(parents=True, exist_ok=True)
        with open(out / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (out / "x.npy").exists():
                tmp = out / f"x.{os.getpid()}.npy"
                first = _numpy(table[:1].to(dtype))
                dst = _aligned_npy(tmp, first.dtype, tuple(table.shape))
                for k in range(0, table.shape[0], _CHUNK_ROWS):
                    dst[k:k + _CHUNK_ROWS] = _numpy(table[k:k + _CHUNK_ROWS].to(dtype))
                dst.flush()
                del dst
                os.replace(tmp, out / "x.npy")
    except OSError:  # a read-only data folder: the rounded rows in memory
        return table.to(dtype)
    return open_copy(out / "x.npy", dtype)


def rows_per_read(tier: DiskTier, batches: list[torch.Tensor], index: torch.Tensor | None = None
                  ) -> dict[str, float]:
    """What the disk tier ``tier`` would read for ``batches`` (lists of ids) with rows laid out
    by ``index`` (id -> row; None: the file's order), without reading: rows, distinct blocks
    and requests, and their ratios."""
    rows = blocks = reads = 0
    saved, tier.index = tier.index, index
    try:
        for ids in batches:
            blk, _ = tier.blocks(ids.long())
            heads, _ = tier.requests(blk)
            rows, blocks, reads = rows + ids.numel(), blocks + blk.numel(), reads + heads.numel()
    finally:
        tier.index = saved
    return {"rows": rows, "blocks": blocks, "reads": reads,
            "rows_per_read": rows / max(reads, 1), "rows_per_block": rows / max(blocks, 1)}
