"""The processed on-disk format: one ``.npy`` per array plus ``meta.json``.

The arrays are the graph store's (:data:`ARRAYS`) and, for a graph that carries a link
prediction split, its edge arrays (``GraphStore.links``: ``train_pos``, ``val_pos``, ...),
which enter the checksum only when present. A typed graph (several node or edge types, or
type names other than the homogeneous ``node``/``(node, to, node)``) adds a ``types`` section
to ``meta.json`` (node types and counts, edge types and counts, target types) and its typed
arrays: ``node_type_offset``, ``type_per_edge``, and ``x__<type>.npy`` per featured type when
there is no single ``x`` (:mod:`gnnscale.data.metadata`). Edge features are ``edge_attr.npy``
(one ``[E, D]`` matrix in CSC order, any graph) or ``edge_attr__<k>.npy`` per featured edge
type (``k``: its position in the ``types`` section's edge types). All of them are verified
and in the checksum like the rest, and a graph without them has the folder it always had. A
graph read from the user's tables keeps side arrays beside it (``save(..., side=...)``): per
node type the
user's ids ``ids__<type>`` and class names ``classes__<type>`` (:mod:`gnnscale.data.idmap`),
listed, checksummed and verified like the rest and their lengths checked against the node
counts; :func:`load` leaves them out of the graph and :func:`side_arrays` reads them, verified.

``meta.json`` records every array's shape, dtype and SHA-256 digest, the scalar fields and a
checksum over all of them: the arrays' digests, the number of classes, the name, the sizes
(``num_nodes``, ``num_edges``, ``num_features``); the sizes are
also checked against the arrays' shapes on every load
(:func:`gnnscale.data.metadata.size_problem`), so an edited ``meta.json`` is refused naming
the field. ``load`` memory-maps the arrays copy-on-write: ranks on one host share the page
cache, nothing is copied until (unless) someone writes.

Every load is verified. The first load of a folder (and any load with ``verify=True``) hashes
every array; a successful check leaves a stamp (``.verified.json``) with each file's size,
inode and modification/change times, so later loads only compare those (microseconds: any
write to a file changes its change time, which no user can set back) and hash only the files
that changed. A file changed in the same clock tick as the stamp was written is not trusted
(time stamps are coarse): it is hashed again on the next load. On a mismatch the error names
the bad file and says that deleting the processed folder rebuilds it. A file cut short, even
inside its header, is named too (it is never read as a pickle).

Copies of one graph that differ in a small array (one per split seed, say) share the large
ones: ``save(..., share=root)`` hard-links an array that a complete copy under ``root`` already
holds (same SHA-256, re-hashed before it is trusted) instead of writing it again, so five
split seeds of Coauthor Physics store its 1.16 GB of features once. Loads map copy-on-write,
so no reader writes through a link; deleting one copy leaves the others whole.

A copy is built in a hidden folder beside its final place, named after the writing process
(:func:`gnnscale.data.publish.temp_folder`), and renamed into place when complete: a process
killed while processing leaves that folder, which the next save of the same graph removes
(never a live writer's). A full disk is one line naming the folder and its free space.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from gnnscale.data import graph as _graph
from gnnscale.data import pages
from gnnscale.data.graph import GraphStore
from gnnscale.data.metadata import (
    ARRAYS,
    EDGE_ATTR,
    EDGE_ATTR_PREFIX,
    FEATURES_PREFIX,
    FORMAT,
    LINK_ARRAYS,
    TYPED_ARRAYS,
    combine,
    fields_string,
    is_side,
    meta_fields,
    size_problem,
)
from gnnscale.data.publish import pid_alive, publish_folder, temp_folder
from gnnscale.errors import UserError

__all__ = ["ProcessedDataError", "array_digest", "checksum", "is_processed", "load", "load_npy",
           "publish_folder", "save", "side_arrays", "unverified", "write_stamp"]

assert LINK_ARRAYS == _graph.LINK_ARRAYS, "metadata.LINK_ARRAYS must list graph.LINK_ARRAYS"
FORMAT_VERSION = FORMAT
STAMP = ".verified.json"
STAMP_DIR_ENV = "GNNSCALE_STAMP_DIR"  # where stamps of read-only folders go
_CHUNK = 1 << 24
SHARE_MIN_BYTES = 1 << 20  # smaller arrays are written: a link saves nothing worth a hash


class ProcessedDataError(UserError, ValueError):
    """A processed folder whose files are damaged or changed; the message names the file."""

    def __init__(self, file: Path, folder: Path, problem: str) -> None:
        super().__init__(f"{file}: {problem}. The processed data is not what was written: "
                         f"delete {folder} and it is rebuilt from the raw data on the next run")


def array_digest(a: np.ndarray) -> str:
    """SHA-256 (32 hex chars) of an array's shape, dtype and bytes."""
    h = hashlib.sha256()  # SHA-256: hardware-accelerated on current CPUs, 2x BLAKE2b here
    h.update(str((a.shape, a.dtype.str)).encode())
    flat = a.reshape(-1).view(np.uint8)
    for start in range(0, flat.size, _CHUNK):
        h.update(flat[start:start + _CHUNK].data)
    return h.hexdigest()[:32]


def _array_digests(arrays: dict[str, np.ndarray]) -> dict[str, str]:
    """SHA-256 of every array, hashed on parallel threads (hashlib releases the GIL)."""
    names = list(arrays)
    with ThreadPoolExecutor(max_workers=min(4, max(1, len(names)))) as pool:
        return dict(zip(names, pool.map(lambda n: array_digest(arrays[n]), names)))


def _types(graph: GraphStore) -> dict | None:
    """The ``types`` section of ``graph``'s meta.json; None for a homogeneous graph."""
    if graph.node_types == (_graph.NODE,) and graph.edge_types == (_graph.EDGE,) \
            and graph.target_types == graph.node_types:
        return None
    return {"node_types": list(graph.node_types),
            "num_nodes": graph.node_type_offset.diff().tolist(),
            "edge_types": [list(et) for et in graph.edge_types],
            "num_edges": graph.num_edges_per_type(),
            "target_types": list(graph.target_types)}


def _graph_fields(graph: GraphStore, types: dict | None) -> str:
    return fields_string(graph.name, graph.num_nodes, graph.num_edges, graph.num_features,
                         types)


def _numpy_arrays(graph: GraphStore) -> dict[str, np.ndarray]:
    out = {name: np.ascontiguousarray(getattr(graph, name).numpy()) for name in ARRAYS
           if getattr(graph, name) is not None}
    out.update({name: np.ascontiguousarray(graph.links[name].long().numpy())
                for name in LINK_ARRAYS if name in graph.links})
    if len(graph.node_types) > 1:
        out["node_type_offset"] = np.ascontiguousarray(graph.node_type_offset.numpy())
    if graph.type_per_edge is not None:
        out["type_per_edge"] = np.ascontiguousarray(graph.type_per_edge.numpy())
    out.update({f"{FEATURES_PREFIX}{t}": np.ascontiguousarray(f.numpy())
                for t, f in graph.type_features.items()})
    if graph.edge_attr is not None:
        out[EDGE_ATTR] = np.ascontiguousarray(graph.edge_attr.numpy())
    out.update({f"{EDGE_ATTR_PREFIX}{graph.edge_types.index(et)}": np.ascontiguousarray(a.numpy())
                for et, a in graph.type_edge_attr.items()})
    return out


def checksum(graph: GraphStore) -> str:
    """Content hash of a graph's arrays, number of classes, name and sizes (hex, 32 chars)."""
    return combine(_array_digests(_numpy_arrays(graph)), graph.num_classes,
                   _graph_fields(graph, _types(graph)))


def is_processed(path: str | os.PathLike) -> bool:
    """True when ``path`` holds a complete processed graph."""
    return (Path(path) / "meta.json").is_file()


def older_format(path: str | os.PathLike) -> int | None:
    """The format of the processed graph in ``path`` when an older gnnscale wrote it (a derived
    copy that can be rebuilt from its source), else None (current, newer, absent or unreadable:
    the loader says what is wrong with those)."""
    try:
        found = json.loads((Path(path) / "meta.json").read_text()).get("format")
    except (OSError, ValueError, AttributeError):
        return None
    if isinstance(found, int) and not isinstance(found, bool) and 0 < found < FORMAT_VERSION:
        return found
    return None


def _file_stats(path: Path, names: list[str]) -> dict[str, list[int]]:
    out = {}
    for name in names:
        st = (path / name).stat()
        out[name] = [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]
    return out


def load_npy(file: Path, mmap_mode: Literal["r+", "r", "w+", "c"] | None = None
             ) -> np.ndarray:
    """``np.load`` of one ``.npy`` file that never falls back to unpickling: a file without
    the ``.npy`` magic (cut short, or overwritten) is a ValueError saying so."""
    magic = np.lib.format.MAGIC_PREFIX
    with open(file, "rb") as f:
        head = f.read(len(magic))
    if head != magic:
        raise ValueError(f"no .npy header ({len(head)} bytes where the {len(magic)}-byte .npy "
                         "magic should be): the file is truncated or was overwritten")
    return np.load(file, mmap_mode=mmap_mode, allow_pickle=False)


def stamp_cache() -> Path:
    """Where stamps of folders this process may not write go: ``$GNNSCALE_STAMP_DIR``, else
    ``$XDG_CACHE_HOME/gnnscale/stamps`` (``~/.cache/gnnscale/stamps``)."""
    given = os.environ.get(STAMP_DIR_ENV)
    if given:
        return Path(given)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "gnnscale" / "stamps"


def _cached_stamp(path: Path) -> Path:
    """The stamp of ``path`` kept in :func:`stamp_cache` (named by the folder's real path)."""
    real = os.path.realpath(path)
    return stamp_cache() / (hashlib.blake2b(real.encode(), digest_size=16).hexdigest() + ".json")


def _put_stamp(path: Path, names: list[str], target: Path, settle: bool) -> bool:
    """Write the stamp of ``names`` in ``path`` as ``target`` (through a temporary file
    beside it); False when that cannot be written (a read-only folder or disk)."""
    tmp = target.parent / f"{target.name}.{os.getpid()}.tmp"
    try:
        for old in target.parent.glob(f"{target.name}.*.tmp"):  # of a killed process
            pid = old.name[len(target.name) + 1:-len(".tmp")]
            if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
                old.unlink(missing_ok=True)
    except OSError:
        pass
    try:
        for _ in range(200 if settle else 1):
            stats = _file_stats(path, names)
            tmp.write_text(json.dumps(stats))
            if max((s[3] for s in stats.values()), default=0) < tmp.stat().st_mtime_ns:
                break
            time.sleep(0.001)
        os.replace(tmp, target)
        return True
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:  # a read-only file system refuses even this
            pass
        return False


_UNSTAMPED: set[str] = set()  # folders this process said it could not stamp


def write_stamp(path: Path, names: list[str], settle: bool = False) -> None:
    """Record that ``names`` in ``path`` were verified as they are now: in the folder
    (``.verified.json``), else, where the folder is read-only, in :func:`stamp_cache`; where
    neither can be written the folder is verified in full on every load, said once in a
    line. ``settle``: wait (a clock tick at most) until the stamp is newer than every file,
    so that :func:`unverified` trusts them all (for a folder just written by this process)."""
    if _put_stamp(path, names, path / STAMP, settle):
        return
    cached = _cached_stamp(path)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass
    if _put_stamp(path, names, cached, settle):
        return
    if str(path) not in _UNSTAMPED:
        _UNSTAMPED.add(str(path))
        print(f"note: {path} is read-only and so is {cached.parent}: its files are verified "
              f"in full on every load (set {STAMP_DIR_ENV} to a folder this run may write to "
              "keep its verification stamps there)", file=sys.stderr, flush=True)


def _vouched(path: Path, stamp: Path, names: list[str]) -> set[str]:
    """The files among ``names`` in ``path`` that the stamp file ``stamp`` vouches for."""
    try:
        stamp_time = stamp.stat().st_mtime_ns
        recorded = json.loads(stamp.read_text())
        now = _file_stats(path, names)
    except (OSError, ValueError):
        return set()
    if not isinstance(recorded, dict):
        return set()
    return {n for n in names if recorded.get(n) == now[n] and now[n][3] < stamp_time}


def unverified(path: Path, names: list[str]) -> set[str]:
    """The files among ``names`` in ``path`` that no stamp (the folder's, or its stamp in
    :func:`stamp_cache` when the folder is read-only) vouches for: changed since it was
    written, or changed in the clock tick it was written in (a later write in that tick
    would leave the same times), or all of them when there is no readable stamp."""
    todo = set(names) - _vouched(path, path / STAMP, names)
    if todo:
        todo -= _vouched(path, _cached_stamp(path), names)
    return todo


def _shared_copies(share: Path, digests: dict[str, str],
                   arrays: dict[str, np.ndarray]) -> dict[str, Path]:
    """``{array name: file}`` for the large arrays that a complete processed copy under
    ``share`` (``share/*/processed``) holds already, each file re-hashed before it is trusted."""
    wanted = {digests[n]: n for n, a in arrays.items() if a.nbytes >= SHARE_MIN_BYTES}
    found: dict[str, Path] = {}
    for meta_file in sorted(share.glob("*/processed/meta.json")) if wanted else []:
        try:
            listed = json.loads(meta_file.read_text())["arrays"]
            candidates = [(wanted[info["sha256"]], meta_file.parent / f"{other}.npy")
                          for other, info in listed.items() if info.get("sha256") in wanted]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # not a copy to share with: it is checked when it is loaded
        for name, file in candidates:
            if name in found:
                continue
            try:
                same = array_digest(load_npy(file, mmap_mode="r")) == digests[name]
            except (OSError, ValueError, EOFError):
                same = False
            if same:
                found[name] = file
    return found


def _write_arrays(tmp: Path, arrays: dict[str, np.ndarray], digests: dict[str, str],
                  share: Path | None, staged: dict[str, tuple[Path, str]]) -> None:
    linked = _shared_copies(share, digests, arrays) if share is not None else {}
    for name, a in arrays.items():
        if name in staged and name not in linked:
            os.replace(staged[name][0], tmp / f"{name}.npy")  # written already, in chunks
            continue
        if name in linked:
            try:
                os.link(linked[name], tmp / f"{name}.npy")
                continue
            except OSError:  # another file system, or no hard links there: write it
                pass
        np.save(tmp / f"{name}.npy", a)


def save(graph: GraphStore, path: str | os.PathLike, share: str | os.PathLike | None = None,
         side: dict[str, np.ndarray] | None = None,
         staged: dict[str, tuple[Path, str]] | None = None) -> str:
    """Write ``graph`` atomically to the folder ``path``; returns the checksum.

    ``staged``: ``{array name: (.npy file, digest)}`` of arrays already written in chunks (on
    the same file system; :class:`gnnscale.data.bounded.Stage`): moved in, neither held in
    memory nor hashed again (the file's shape and dtype must be the graph's array's).

    ``side``: arrays kept beside the graph (``ids__<type>``, ``classes__<type>``: the user's
    ids and class names, :mod:`gnnscale.data.idmap`), written, listed and checksummed with it.

    Safe when several processes save the same graph at once: the first complete copy wins and
    readers never see a missing or partial folder. ``share``: a folder whose processed copies
    (``share/*/processed``) may hold some of the same arrays; those are hard-linked, not
    written again.
    """
    path = Path(path)
    tmp = temp_folder(path)
    arrays: dict[str, np.ndarray] = {}
    try:
        arrays = _numpy_arrays(graph)
        arrays.update(_side(side or {}))
        staged = _staged(staged or {}, arrays)
        digests = _array_digests({n: a for n, a in arrays.items() if n not in staged})
        digests.update({n: staged[n][1] for n in staged})
        _write_arrays(tmp, arrays, digests, None if share is None else Path(share), staged)
        types = _types(graph)
        digest = combine(digests, graph.num_classes, _graph_fields(graph, types))
        meta = {
            "format": FORMAT_VERSION,
            "name": graph.name,
            "num_nodes": graph.num_nodes,
            "num_edges": graph.num_edges,
            "num_features": graph.num_features,
            "num_classes": graph.num_classes,
            "checksum": digest,
            "arrays": {name: {"shape": list(a.shape), "dtype": a.dtype.str,
                              "sha256": digests[name]} for name, a in arrays.items()},
            "meta": graph.meta,
        }
        if types is not None:
            meta["types"] = types
        problem = size_problem(meta)  # side arrays of another graph, say
        if problem:
            raise ValueError(f"not saving {graph.name} to {path}: {problem}")
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        write_stamp(tmp, ["meta.json", *(f"{n}.npy" for n in arrays)], settle=True)
        publish_folder(tmp, path, "meta.json")
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        needed = sum(a.nbytes for a in arrays.values())
        if err.errno in (errno.ENOSPC, errno.EDQUOT) or (err.errno is None
                                                          and _free(path) < needed):
            raise DiskFullError(path, needed) from None  # numpy's short write has no errno
        raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return digest


def _staged(staged: dict[str, tuple[Path, str]], arrays: dict[str, np.ndarray]
            ) -> dict[str, tuple[Path, str]]:
    """The staged files that hold one of ``arrays`` (same shape and dtype as its header)."""
    out = {}
    for name, (file, digest) in staged.items():
        if name in arrays and Path(file).is_file():
            a = load_npy(Path(file), mmap_mode="r")
            if a.shape == arrays[name].shape and a.dtype == arrays[name].dtype:
                out[name] = (Path(file), digest)
    return out


def _side(side: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The side arrays to save, checked to be side arrays (names) of plain 1-D values."""
    out = {}
    for name, a in side.items():
        a = np.ascontiguousarray(a)
        if not is_side(name) or a.ndim != 1 or a.dtype.kind not in "iuU":
            raise ValueError(f"side array {name!r} ({a.dtype} {a.shape}) is not an id map or "
                             "class names: ids__<type> or classes__<type>, 1-D")
        out[name] = a
    return out


def _free(path: Path) -> int:
    try:
        return shutil.disk_usage(path.parent).free
    except OSError:
        return 1 << 62


class DiskFullError(UserError, OSError):
    """No space left where a processed graph is written; the message names the folder, the
    space it needs and the space left."""

    def __init__(self, path: Path, needed: int) -> None:
        try:
            free = f"{shutil.disk_usage(path.parent).free / 2**20:.1f} MiB free there"
        except OSError:
            free = "free space unknown"
        super().__init__(f"cannot write the processed graph to {path}: no space left on "
                         f"device (it needs {needed / 2**20:.1f} MiB, {free}); free space "
                         "there or set data_root to a disk with room")


def _read_meta(path: Path) -> dict:
    meta_file = path / "meta.json"
    if not meta_file.is_file():
        raise FileNotFoundError(f"no processed graph at {path} (missing meta.json)")
    try:
        meta = json.loads(meta_file.read_text())
        if meta.get("format") != FORMAT_VERSION:
            raise ProcessedDataError(meta_file, path, f"field format is {meta.get('format')!r}, "
                                     f"this gnnscale reads {FORMAT_VERSION}")
        unknown = {n for n in set(meta["arrays"]) - set(ARRAYS) - set(LINK_ARRAYS)
                   - set(TYPED_ARRAYS) - {EDGE_ATTR}
                   if not n.startswith((FEATURES_PREFIX, EDGE_ATTR_PREFIX)) and not is_side(n)}
        if unknown or not isinstance(meta["num_classes"], int):
            raise KeyError(f"unexpected arrays {sorted(unknown)}" if unknown else "num_classes")
        problem = size_problem(meta)
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as err:
        raise ProcessedDataError(meta_file, path, f"not a valid meta.json ({err})") from err
    if problem:
        raise ProcessedDataError(meta_file, path, problem)
    return meta


def _map_arrays(path: Path, meta: dict, mmap: bool) -> dict[str, np.ndarray]:
    out = {}
    for name, info in meta["arrays"].items():
        file = path / f"{name}.npy"
        try:
            a = load_npy(file, mmap_mode="c" if mmap else None)
        except (OSError, ValueError, EOFError) as err:
            raise ProcessedDataError(file, path, f"cannot be read ({err})") from err
        if list(a.shape) != info["shape"] or a.dtype.str != info["dtype"]:
            raise ProcessedDataError(file, path, f"shape {list(a.shape)} / dtype {a.dtype.str} "
                                     f"do not match meta.json ({info['shape']} / "
                                     f"{info['dtype']})")
        out[name] = a
    return out


def _verify(path: Path, meta: dict, arrays: dict[str, np.ndarray],
            only: set[str] | None = None) -> None:
    """Hash ``arrays`` (those named in ``only`` when given: meta.json is then trusted, so
    the checksum over all of them is not recomputed) and compare with meta.json."""
    digests = _array_digests(arrays if only is None else {n: arrays[n] for n in only})
    for name, got in digests.items():
        if got != meta["arrays"][name].get("sha256"):
            raise ProcessedDataError(path / f"{name}.npy", path, "checksum mismatch: its "
                                     "content changed since it was written")
    if only is None and combine(digests, meta["num_classes"], meta_fields(meta)) \
            != meta["checksum"]:
        raise ProcessedDataError(path / "meta.json", path, "checksum mismatch: its checksum, "
                                 "name, sizes or number of classes was edited")


def load(path: str | os.PathLike, mmap: bool = True, verify: bool | None = None) -> GraphStore:
    """Read a processed graph; arrays memory-mapped copy-on-write unless ``mmap=False``.

    ``verify=None`` hashes the arrays that the folder's verification stamp does not vouch for
    (every one when meta.json changed); ``True`` always hashes all; ``False`` only checks
    shapes and graph invariants.
    """
    path = Path(path)
    meta = _read_meta(path)
    arrays = _map_arrays(path, meta, mmap)
    names = ["meta.json", *(f"{n}.npy" for n in arrays)]
    todo = set(names) if verify else unverified(path, names) if verify is None else set()
    if todo:
        _verify(path, meta, arrays, None if "meta.json" in todo else
                {n for n in arrays if f"{n}.npy" in todo})
        write_stamp(path, names)
    tensors = {k: torch.from_numpy(a) for k, a in arrays.items() if not is_side(k)}
    # the checks below read the mapped arrays a chunk at a time and give each chunk's pages
    # back (nothing has written them yet): RSS stays at the working set, not the files
    scope = pages.releasing([(t, arrays[k]) for k, t in tensors.items()])
    with scope:
        graph = _built(path, meta, tensors)
    graph.meta["checksum"] = meta["checksum"]
    graph.meta["processed_dir"] = str(path.resolve())  # sampler workers map the same files
    return graph


def _built(path: Path, meta: dict, tensors: dict[str, torch.Tensor]) -> GraphStore:
    """The graph of a processed folder's mapped arrays, checked against meta.json."""
    types = meta.get("types")
    arrays: dict[str, Any] = tensors  # each array of the folder by its field's name
    typed: dict[str, Any] = {} if types is None else {
        "node_types": tuple(types["node_types"]),
        "edge_types": tuple(tuple(et) for et in types["edge_types"]),
        "target_types": tuple(types["target_types"]),
        "type_features": {k[len(FEATURES_PREFIX):]: tensors.pop(k) for k in list(tensors)
                          if k.startswith(FEATURES_PREFIX)},
        "type_edge_attr": {tuple(types["edge_types"][int(k[len(EDGE_ATTR_PREFIX):])]):
                           tensors.pop(k) for k in list(tensors)
                           if k.startswith(EDGE_ATTR_PREFIX)}}
    try:
        graph = GraphStore(num_classes=meta["num_classes"], name=meta["name"],
                           meta=meta.get("meta", {}),
                           links={k: tensors.pop(k) for k in LINK_ARRAYS if k in tensors},
                           **typed, **arrays)
    except (TypeError, ValueError) as err:
        raise ProcessedDataError(path, path, str(err)) from err
    if types is not None and (graph.node_type_offset.diff().tolist() != types["num_nodes"]
                              or graph.num_edges_per_type() != types["num_edges"]):
        raise ProcessedDataError(path / "meta.json", path, "field types.num_nodes or "
                                 "types.num_edges disagrees with node_type_offset or "
                                 "type_per_edge")
    return graph


def side_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The side arrays of the processed graph in ``path`` (``ids__<type>``,
    ``classes__<type>``), memory-mapped read-only and verified as :func:`load` verifies:
    listed in a consistent meta.json (one of them left in the folder but not listed is
    refused: it belongs to another graph), their shapes checked against the graph's node
    counts, hashed unless the folder's stamp vouches for them (copy-on-write maps: writing
    to one never reaches the file)."""
    path = Path(path)
    meta = _read_meta(path)
    listed = {n: info for n, info in meta["arrays"].items() if is_side(n)}
    stray = sorted(p.stem for p in path.glob("*__*.npy") if is_side(p.stem)
                   and p.stem not in listed)
    if stray:
        raise ProcessedDataError(path / f"{stray[0]}.npy", path, "is not listed in meta.json: "
                                 "it was not written with this graph")
    arrays = _map_arrays(path, {"arrays": listed}, mmap=True)
    todo = unverified(path, ["meta.json", *(f"{n}.npy" for n in arrays)])
    if "meta.json" in todo:
        recorded = {n: info["sha256"] for n, info in meta["arrays"].items()}
        if combine(recorded, meta["num_classes"], meta_fields(meta)) != meta["checksum"]:
            raise ProcessedDataError(path / "meta.json", path, "checksum mismatch: its "
                                     "checksum, name, sizes or number of classes was edited")
    _verify(path, meta, arrays, set(arrays) if "meta.json" in todo else
            {n for n in arrays if f"{n}.npy" in todo})
    return arrays
