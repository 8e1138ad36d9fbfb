"""Write a partitioned layout (:mod:`gnnscale.partition.layout`) and open one host's view of it.

A layout is of one of two kinds, over one base (:mod:`gnnscale.partition.part_files`: writing
a part's arrays and its info file, the checks before writing, a part opened as a graph): the
edge-cut layout, here, and the vertex-cut layout (:mod:`gnnscale.partition.vc_parts`), which
:func:`write_layout` and :meth:`PartLayout.open_part` hand a vertex-cut book or layout to.

:func:`write_layout` writes the layout of a graph and its edge-cut book one part at a time (a
vertex-cut book's layout is :mod:`gnnscale.partition.vc_parts`'):
part q's arrays are gathered (its owned rows of features and labels, the in-edges of its
owned nodes with their weights and edge features), hashed, written and dropped before part
q + 1, so the writer holds the graph (memory-mapped when processed) plus one part, never k
copies. The layout is built in a hidden folder beside ``DIR`` and renamed into place when
complete.

:class:`PartLayout` opens a layout on a host: :meth:`PartLayout.open_part` gives rank r a
:class:`PartGraph` of part r, a :class:`~gnnscale.data.graph.GraphStore` in the GLOBAL id
space built from the layout's global arrays and that part's folder only: ``indptr`` runs over
all N nodes (empty for the nodes it does not own), ``indices`` are its in-edges' global
sources, ``in_degree()`` is the whole graph's, ``num_edges`` the whole graph's (``held_edges``:
its own), and ``x``/``y`` are :class:`RowView` s that hold the owned rows and name the node
when asked for another. A rank of a strategy that samples the whole graph (``data``,
``split``) opens it with ``topology=True`` instead: a :class:`TopologyGraph`, the whole graph's
CSC (``indptr``, ``indices``, ``edge_weight``) and labels from the top folder, and only its
part's ``owned`` ids and ``x`` rows (a :class:`RowView` that also knows every node's owner, from
the book, so the feature store fetches the other rows from their owners). Every array is
memory-mapped copy-on-write and verified like
processed data (digests in ``part.json``/``layout.json``, a stamp so a second load hashes
nothing unchanged); every file the layout opens is recorded (:attr:`PartLayout.opened`), and
:func:`host_report` sums, per host, the bytes its ranks opened on disk and mapped.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnscale.data.graph import GraphStore
from gnnscale.data.metadata import DatasetMeta
from gnnscale.data.processed import array_digest, load_npy, unverified, write_stamp
from gnnscale.data.publish import publish_folder, temp_folder
from gnnscale.partition.book import PartitionBook
from gnnscale.partition.layout import (
    BOOK_DIR,
    LAYOUT_FILE,
    LAYOUT_FORMAT,
    PART_FILE,
    TOPOLOGY,
    LayoutError,
    config_hash,
    dataset_identity,
    part_dir,
    partitioner_name,
    read_layout,
    read_part,
)
from gnnscale.partition.part_files import (
    NotHeldError,
    PartGraph,
    RowView,
    check_writable,
    save_arrays,
    with_rows,
    write_info,
)
from gnnscale.partition.provider import PartitionProvider, check_book
from gnnscale.partition.vc_parts import open_vc_part, write_vc_layout

__all__ = ["LayoutPartitions", "NotHeldError", "PartGraph", "PartLayout", "RowView",
           "TopologyGraph", "format_host_report", "host_report", "part_arrays", "write_layout"]


# ---- writing --------------------------------------------------------------------------------

def part_arrays(graph: GraphStore, part: torch.Tensor, q: int) -> dict[str, np.ndarray]:
    """Part ``q``'s arrays: owned ids, the CSC of their in-edges (global sources), their rows
    of ``x`` and ``y``, and the in-edges' weights and edge features (CSC order)."""
    owned = (part == q).nonzero().flatten()
    start = graph.indptr[owned]
    deg = graph.indptr[owned + 1] - start
    indptr = torch.zeros(owned.numel() + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(deg, 0)
    held = int(indptr[-1])
    eids = torch.repeat_interleave(start - indptr[:-1], deg) + torch.arange(held)
    out = {"owned": owned, "indptr": indptr, "indices": graph.indices[eids]}
    return with_rows(graph, out, owned, owned, eids)


def write_layout(graph: GraphStore, book: PartitionBook, out: str | os.PathLike,
                 dataset: dict, partitioner: dict, log: Callable[[str], object] = print
                 ) -> dict:
    """Write the layout of ``graph`` partitioned by ``book`` to the folder ``out`` (replacing
    a layout there); ``dataset`` and ``partitioner`` are the composed config nodes they came
    from (recorded, and compared with a run's). Returns the layout's ``layout.json``."""
    from gnnscale.partition.store import graph_checksum

    if book.kind == "vertex_cut":  # its own layout (gnnscale/partition/vc_parts.py)
        return write_vc_layout(graph, book, out, dataset, partitioner, log)
    out = Path(os.path.expanduser(str(out)))
    check_writable(graph, book, out)
    tmp = temp_folder(out)
    try:
        k = book.num_parts
        identity = {"graph_checksum": graph_checksum(graph), "num_parts": k,
                    "partitioner": partitioner_name(partitioner),
                    "seed": partitioner.get("seed", 0), "config_hash": config_hash(partitioner)}
        glob = {"indptr": graph.indptr.numpy(), "indices": graph.indices.numpy()}
        for name in ("edge_weight", "y"):
            if getattr(graph, name) is not None:
                glob[name] = getattr(graph, name).numpy()
        for split in ("train_idx", "val_idx", "test_idx"):
            ids = getattr(graph, split)
            if ids is not None:
                glob[split] = ids.long().numpy()
        arrays = save_arrays(tmp, glob)
        book.save(tmp / BOOK_DIR)
        parts, sizes = [], []
        for q in range(k):  # one part at a time: gathered, written, dropped
            folder = part_dir(tmp, q)
            listed = save_arrays(folder, part_arrays(graph, book.part, q))
            info = write_info(folder, {"format": LAYOUT_FORMAT, "part": q, **identity,
                                        "num_owned": listed["owned"]["shape"][0],
                                        "num_edges": listed["indices"]["shape"][0],
                                        "arrays": listed}, PART_FILE)
            parts.append(info["checksum"])
            sizes.append(sum(f.stat().st_size for f in folder.iterdir()))
        layout = write_info(tmp, {
            "format": LAYOUT_FORMAT, **identity, "kind": book.kind,
            "partitioner_config": partitioner, "dataset": dataset_identity(dataset),
            "graph": {"name": graph.name, "num_nodes": graph.num_nodes,
                      "num_edges": graph.num_edges, "num_features": graph.num_features,
                      "num_classes": graph.num_classes},
            "dataset_meta": asdict(DatasetMeta.of(graph)), "quality": book.quality,
            "parts": parts, "part_bytes": sizes, "arrays": arrays}, LAYOUT_FILE)
        publish_folder(tmp, out, LAYOUT_FILE, replace=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(f"parts: wrote {k} parts of {graph.name} to {out} "
        f"({', '.join(f'{b / 2**20:.1f}' for b in sizes)} MiB each)")
    return layout


# ---- reading ---------------------------------------------------------------------------------

@dataclass(eq=False)
class TopologyGraph(GraphStore):
    """One part of a layout for a rank that samples the whole graph (module docstring): the
    whole topology and every label, the feature rows of its own nodes only (``x`` is a
    :class:`RowView` whose ``owner`` names every node's part, so a feature store fetches the
    other rows from their owners)."""

    part: int = 0
    #: global ids of the nodes this part owns, ascending
    owned: torch.Tensor | None = None
    layout: Any = field(default=None, repr=False)


class PartLayout:
    """A layout folder opened on one host: its verified ``layout.json``, the parts it opens
    (:meth:`open_part`), the book (:meth:`partitions`) and every file it opened."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(os.path.expanduser(str(root))).absolute()
        self.opened: list[Path] = [self.root / LAYOUT_FILE]
        self.info = read_layout(self.root)
        self._book: PartitionBook | None = None

    def _arrays(self, folder: Path, listed: dict, meta_file: str,
                skip: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
        """``folder``'s arrays but ``skip``, memory-mapped copy-on-write and verified against
        ``listed``."""
        out = {}
        for name, spec in listed.items():
            if name in skip:
                continue
            file = folder / f"{name}.npy"
            self.opened.append(file)
            try:
                a = load_npy(file, mmap_mode="c")
            except (OSError, ValueError, EOFError) as err:
                raise LayoutError(f"{file} cannot be read ({err}): copy it again from the "
                                  "machine that partitioned the graph") from None
            if list(a.shape) != spec["shape"] or a.dtype.str != spec["dtype"]:
                raise LayoutError(f"{file}: shape {list(a.shape)} / dtype {a.dtype.str} do "
                                  f"not match {folder / meta_file}: copy it again")
            out[name] = a
        names = [meta_file, *(f"{n}.npy" for n in out)]
        todo = unverified(folder, names)
        if meta_file in todo:
            todo = set(names)
        for name, a in out.items():
            if f"{name}.npy" in todo and array_digest(a) != listed[name]["sha256"]:
                raise LayoutError(f"{folder / f'{name}.npy'}: checksum mismatch, its content "
                                  "changed since it was written: copy it again")
        if todo:
            write_stamp(folder, names)
        return out

    def open_part(self, part: int, topology: bool = False) -> PartGraph | TopologyGraph:
        """Part ``part`` as a :class:`PartGraph` (only the global arrays but the topology, and
        its folder, read); ``topology=True`` (a strategy that samples the whole graph): as a
        :class:`TopologyGraph` (the global arrays, and its folder's owned ids and rows)."""
        info = self.info
        if not 0 <= part < info["num_parts"]:
            raise LayoutError(f"rank {part} has no part in {self.root}: it holds "
                              f"{info['num_parts']} parts, one per rank")
        if info.get("kind") == "vertex_cut":  # its own layout (gnnscale/partition/vc_parts.py)
            return open_vc_part(self, part)
        folder = part_dir(self.root, part)
        self.opened.append(folder / PART_FILE)
        pinfo = read_part(self.root, part, info)
        glob = {k: torch.from_numpy(a) for k, a in self._arrays(
            self.root, info["arrays"], LAYOUT_FILE, () if topology else TOPOLOGY).items()}
        skip = ("indptr", "indices", "y", "edge_weight", "edge_attr") if topology else ()
        own = {k: torch.from_numpy(a) for k, a in
               self._arrays(folder, pinfo["arrays"], PART_FILE, skip).items()}
        g = info["graph"]
        n, owned = int(g["num_nodes"]), own["owned"]
        if topology:
            return self._topology(part, glob, own)
        indptr = torch.zeros(n + 1, dtype=torch.int64)  # over all N: empty where not owned
        indptr[owned + 1] = own["indptr"][1:] - own["indptr"][:-1]
        indptr = torch.cumsum(indptr, 0)
        where = f"part {part} of {self.root}"
        views: dict[str, Any] = {k: RowView(own[k], owned, n, what, where)
                 for k, what in (("x", "feature"), ("y", "label")) if k in own}
        graph = PartGraph(
            indptr=indptr, indices=own["indices"], **views,
            edge_weight=own.get("edge_weight"), edge_attr=own.get("edge_attr"),
            train_idx=glob.get("train_idx"), val_idx=glob.get("val_idx"),
            test_idx=glob.get("test_idx"), num_classes=int(g["num_classes"]), name=g["name"],
            meta={"checksum": info["graph_checksum"], "parts": str(self.root), "part": part},
            part=part, owned=owned, whole_indptr=glob["indptr"],
            whole_edges=int(g["num_edges"]), layout=self)
        return graph

    def _topology(self, part: int, glob: dict, own: dict) -> TopologyGraph:
        """The :class:`TopologyGraph` of part ``part`` from the global arrays and its own."""
        info, g = self.info, self.info["graph"]
        n, owned = int(g["num_nodes"]), own["owned"]
        x: Any = None  # a RowView standing in for the feature matrix
        if "x" in own:
            x = RowView(own["x"], owned, n, "feature", f"part {part} of {self.root}",
                        owner=self.book().part)
        return TopologyGraph(
            indptr=glob["indptr"], indices=glob["indices"], x=x, y=glob.get("y"),
            edge_weight=glob.get("edge_weight"), train_idx=glob.get("train_idx"),
            val_idx=glob.get("val_idx"), test_idx=glob.get("test_idx"),
            num_classes=int(g["num_classes"]), name=g["name"],
            meta={"checksum": info["graph_checksum"], "parts": str(self.root), "part": part},
            part=part, owned=owned, layout=self)

    def book(self) -> PartitionBook:
        """The layout's partition book, verified, of this layout's graph."""
        if self._book is None:
            folder = self.root / BOOK_DIR
            try:
                book = PartitionBook.load(folder)
            except (OSError, ValueError) as err:
                raise LayoutError(f"{folder}: {err}; copy the book folder again") from None
            listed = json.loads((folder / "book.json").read_text())["arrays"]
            self.opened += [folder / "book.json", *(folder / f"{n}.npy" for n in listed)]
            if book.meta.get("checksum") != self.info["graph_checksum"] or \
                    book.num_parts != self.info["num_parts"]:
                raise LayoutError(f"{folder} is the book of another partitioning than "
                                  f"{self.root / LAYOUT_FILE}: copy the layout's own book")
            self._book = book
        return self._book

    def partitions(self) -> LayoutPartitions:
        """The provider a run given this layout asks for its book."""
        return LayoutPartitions(self)

    def bytes_opened(self) -> dict[str, Any]:
        """This process's files of the layout: ``files`` (``{path: bytes on disk}`` of those it
        opened) and ``mapped`` (``{path: bytes}`` of its memory maps of them, from
        ``/proc/self/maps``), with the host's name."""
        files = {str(p): os.stat(p).st_size for p in sorted(set(self.opened)) if p.exists()}
        return {"host": socket.gethostname(), "files": files, "mapped": _mapped(self.root),
                "disk_bytes": sum(files.values())}


class LayoutPartitions(PartitionProvider):
    """Serves the layout's book (checked for size and kind), as the runner's provider."""

    def __init__(self, layout: PartLayout) -> None:
        self.layout = layout
        self.name = layout.info["partitioner"]

    def get(self, num_parts: int, kind: str | None = None,
            vertex_weights: torch.Tensor | None = None) -> PartitionBook:
        """The layout's book with ``num_parts`` parts of ``kind``."""
        if vertex_weights is not None:
            raise LayoutError("this strategy weighs the partition by its samples, which a "
                              "written layout cannot: drop parts=")
        book = self.layout.book()
        check_book(book, num_parts, kind, self.name)
        return book


def _mapped(root: Path) -> dict[str, int]:
    """``{file: bytes}`` this process maps of the files under ``root`` (Linux; else empty)."""
    out: dict[str, int] = {}
    prefix = str(root) + os.sep
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and parts[5].strip().startswith(prefix):
                    lo, hi = (int(x, 16) for x in parts[0].split("-"))
                    name = parts[5].strip()
                    out[name] = out.get(name, 0) + hi - lo
    except OSError:
        pass
    return out


def host_report(per_rank: list[dict]) -> dict[str, dict]:
    """Per host (from its ranks' :meth:`PartLayout.bytes_opened`): its ranks, the bytes on
    disk of the distinct files they opened and the bytes they map of them (a file two ranks
    of a host map counts once: they share its pages)."""
    hosts: dict[str, dict] = {}
    for rank, rep in enumerate(per_rank):
        h = hosts.setdefault(rep["host"], {"ranks": [], "files": {}, "mapped": {}})
        h["ranks"].append(rank)
        h["files"].update(rep["files"])
        for name, size in rep["mapped"].items():
            h["mapped"][name] = max(size, h["mapped"].get(name, 0))
    return {name: {"ranks": h["ranks"], "disk_bytes": sum(h["files"].values()),
                   "mapped_bytes": sum(h["mapped"].values())} for name, h in hosts.items()}


def format_host_report(hosts: dict[str, dict], root: str) -> str:
    """One line per host: its ranks, bytes on disk opened and bytes mapped."""
    return "\n".join(
        f"parts: host {name} (ranks {', '.join(map(str, h['ranks']))}) opened "
        f"{h['disk_bytes'] / 2**20:.2f} MiB of {root} on disk, "
        f"{h['mapped_bytes'] / 2**20:.2f} MiB memory-mapped" for name, h in hosts.items())
