"""The processed on-disk format: one ``.npy`` per array plus ``meta.json``.

``meta.json`` records every array's shape and dtype, the scalar fields and a content checksum
(BLAKE2b over the arrays' bytes). ``load`` memory-maps the arrays copy-on-write: ranks on one
host share the page cache, nothing is copied until (unless) someone writes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch

from gnnscale.data.graph import GraphStore

ARRAYS = ("indptr", "indices", "x", "y", "train_idx", "val_idx", "test_idx", "edge_weight")
FORMAT_VERSION = 1


def checksum(graph: GraphStore) -> str:
    """Content hash of a graph's arrays and scalar fields (hex, 32 chars)."""
    h = hashlib.blake2b(digest_size=16)
    for name in ARRAYS:
        t = getattr(graph, name)
        h.update(name.encode())
        if t is None:
            h.update(b"none")
            continue
        a = np.ascontiguousarray(t.numpy())
        h.update(str((a.shape, a.dtype.str)).encode())
        h.update(memoryview(a.reshape(-1).view(np.uint8)))
    h.update(str(graph.num_classes).encode())
    return h.hexdigest()


def is_processed(path: str | os.PathLike) -> bool:
    """True when ``path`` holds a complete processed graph."""
    return (Path(path) / "meta.json").is_file()


def publish_folder(tmp: Path, path: Path, marker: str) -> None:
    """Move the finished folder ``tmp`` to ``path`` atomically (``marker`` = its last file).

    A leftover of an interrupted save (no ``marker``) is removed; a complete copy is replaced.
    When another process publishes the same folder at the same moment, the first complete copy
    wins and ``tmp`` is discarded: safe for concurrent savers (e.g. torchrun ranks).
    """
    if path.exists() and not (path / marker).is_file():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():  # move the complete copy aside first: rename cannot replace a folder
        old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old.", dir=path.parent))
        os.replace(path, old / "g")
        shutil.rmtree(old, ignore_errors=True)
    try:
        os.rename(tmp, path)
    except OSError:
        if not (path / marker).is_file():
            raise
        shutil.rmtree(tmp, ignore_errors=True)


def save(graph: GraphStore, path: str | os.PathLike) -> str:
    """Write ``graph`` atomically to the folder ``path``; returns the checksum.

    Safe when several processes save the same graph at once: the first complete copy wins.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        arrays = {}
        for name in ARRAYS:
            t = getattr(graph, name)
            if t is None:
                continue
            a = np.ascontiguousarray(t.numpy())
            np.save(tmp / f"{name}.npy", a)
            arrays[name] = {"shape": list(a.shape), "dtype": a.dtype.str}
        digest = checksum(graph)
        meta = {
            "format": FORMAT_VERSION,
            "name": graph.name,
            "num_nodes": graph.num_nodes,
            "num_edges": graph.num_edges,
            "num_features": graph.num_features,
            "num_classes": graph.num_classes,
            "checksum": digest,
            "arrays": arrays,
            "meta": graph.meta,
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        publish_folder(tmp, path, "meta.json")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return digest


def load(path: str | os.PathLike, mmap: bool = True, verify: bool = False) -> GraphStore:
    """Read a processed graph; arrays memory-mapped copy-on-write unless ``mmap=False``."""
    path = Path(path)
    meta_file = path / "meta.json"
    if not meta_file.is_file():
        raise FileNotFoundError(f"no processed graph at {path} (missing meta.json)")
    meta = json.loads(meta_file.read_text())
    if meta.get("format") != FORMAT_VERSION:
        raise ValueError(
            f"{path} has processed format {meta.get('format')}, this gnnscale reads "
            f"{FORMAT_VERSION}: delete the folder to reprocess"
        )
    fields = {}
    for name, info in meta["arrays"].items():
        a = np.load(path / f"{name}.npy", mmap_mode="c" if mmap else None)
        if list(a.shape) != info["shape"] or a.dtype.str != info["dtype"]:
            raise ValueError(f"{path / (name + '.npy')} does not match meta.json: reprocess it")
        fields[name] = torch.from_numpy(a)
    graph = GraphStore(
        num_classes=meta["num_classes"], name=meta["name"], meta=meta.get("meta", {}), **fields
    )
    graph.meta["checksum"] = meta["checksum"]
    graph.meta["processed_dir"] = str(path.resolve())  # sampler workers map the same files
    if verify and checksum(graph) != meta["checksum"]:
        raise ValueError(f"checksum mismatch for {path}: the files changed, reprocess them")
    return graph
