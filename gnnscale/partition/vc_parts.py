"""The vertex-cut layout: write one (:func:`write_vc_layout`) and open a host's view of a part
(:func:`open_vc_part`).

``python -m gnnscale.partition ... parts=DIR`` with a vertex-cut partitioner (``cvc``,
``hvc``, ``oec``, ``iec``) writes this layout; :func:`gnnscale.partition.parts.write_layout`
and :meth:`~gnnscale.partition.parts.PartLayout.open_part` hand a vertex-cut book or layout
here. The top folder is the edge-cut layout's (``layout.json`` with ``kind: vertex_cut``, the
whole graph's ``indptr`` for its in-degrees, the splits), except that ``book/`` holds every
node's master part and the mirror lists but not ``edge_part`` (one entry per edge: each part's
edges are in its own folder). A part folder holds:

- ``edge_ids``: the whole graph's CSC positions of its edges (ascending), ``targets``: the
  destinations of those edges (ascending), ``indptr`` over ``targets`` and ``indices`` (global
  source ids): the CSC of its edges over the nodes it touches;
- ``masters``: the nodes it masters (ascending), their rows of ``y``;
- ``read``: its masters and the sources of its edges (ascending), their rows of ``x``: layer
  0 reads the input rows of every local source directly, as DeepGalois loads them;
- ``bcast_keys`` and ``reduce_keys``: its mirror lists, ``holder * N + node`` (ascending) for
  every other part ``holder`` holding an edge whose source (broadcast) or destination (reduce)
  is one of its masters: whom its masters' rows go to, whose partial aggregates come back;
- in the order of ``edge_ids``, ``edge_weight`` and ``edge_attr`` when the graph has them.

``part.json`` records them as the edge-cut part's do (shape, dtype, SHA-256, identity) and
``sync``: whether any part broadcasts or reduces at all (every rank takes the same path).
The writer holds the graph (memory-mapped when processed), the book and one part at a time.

:class:`VertexCutPart` is a part opened as a graph in the global id space: ``indptr`` over all
N nodes holding the part's edges, ``x`` the rows of ``read``, ``y`` its masters' rows,
``in_degree()`` the whole graph's, and the mirror lists (:attr:`VertexCutPart.sync_keys`) from
which :class:`~gnnscale.strategies.fullgraph.vertex_cut.VertexCutPlan` derives its sync sets
without the other parts' edges.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnscale.data.graph import GraphStore
from gnnscale.data.metadata import DatasetMeta
from gnnscale.data.publish import publish_folder, temp_folder
from gnnscale.partition._graph import edge_src
from gnnscale.partition.book import PartitionBook
from gnnscale.partition.layout import (
    BOOK_DIR,
    LAYOUT_FILE,
    LAYOUT_FORMAT,
    PART_FILE,
    LayoutError,
    config_hash,
    dataset_identity,
    part_dir,
    partitioner_name,
    read_part,
)
from gnnscale.partition.part_files import (
    PartGraph,
    RowView,
    check_writable,
    save_arrays,
    with_rows,
    write_info,
)

#: the directions of master/mirror traffic, as the mirror lists name them
SYNCS = ("bcast", "reduce")


def _dst(graph: GraphStore) -> torch.Tensor:
    """The destination of every held edge in CSC order (from ``indptr``)."""
    return torch.repeat_interleave(torch.arange(graph.num_nodes),
                                   graph.indptr[1:] - graph.indptr[:-1])


def mirror_keys(holder: torch.Tensor, end: torch.Tensor, master: torch.Tensor,
                n: int) -> torch.Tensor:
    """Sorted unique ``holder * n + node`` over the edges whose ``end`` is mastered elsewhere
    than the edge's ``holder``."""
    away = holder != master[end]
    return torch.unique(holder[away] * n + end[away])


def edge_part(book: PartitionBook) -> torch.Tensor:
    """The part of every edge (CSC order) of the vertex-cut ``book``."""
    if book.edge_part is None:
        raise ValueError(f"a vertex-cut layout needs a vertex-cut book, got a {book.kind} one")
    return book.edge_part


def vc_part_arrays(graph: GraphStore, book: PartitionBook, q: int,
                   keys: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Part ``q``'s arrays (module docstring); ``keys`` every direction's mirror keys."""
    n, master = graph.num_nodes, book.part
    eids = (edge_part(book) == q).nonzero().flatten()
    src, dst = graph.indices[eids].long(), _dst(graph)[eids]
    targets, counts = torch.unique_consecutive(dst, return_counts=True)
    indptr = torch.zeros(targets.numel() + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(counts, 0)
    masters = (master == q).nonzero().flatten()
    read = torch.unique(torch.cat([masters, src]))
    out = {"edge_ids": eids, "targets": targets, "indptr": indptr, "indices": src,
           "masters": masters, "read": read}
    for d in SYNCS:
        k = keys[d]
        out[f"{d}_keys"] = k[master[k % n] == q]
    return with_rows(graph, out, read, masters, eids)


def write_vc_layout(graph: GraphStore, book: PartitionBook, out: str | os.PathLike,
                    dataset: dict, partitioner: dict,
                    log: Callable[[str], object] = print) -> dict:
    """Write the vertex-cut layout of ``graph`` cut by the vertex-cut ``book`` to ``out``
    (replacing a layout there), as :func:`gnnscale.partition.parts.write_layout` does an
    edge-cut's. Returns its ``layout.json``."""
    from gnnscale.partition.store import graph_checksum

    out = Path(os.path.expanduser(str(out)))
    check_writable(graph, book, out)
    tmp = temp_folder(out)
    try:
        k, n = book.num_parts, graph.num_nodes
        identity = {"graph_checksum": graph_checksum(graph), "num_parts": k,
                    "partitioner": partitioner_name(partitioner),
                    "seed": partitioner.get("seed", 0), "config_hash": config_hash(partitioner)}
        glob = {"indptr": graph.indptr.numpy()}
        for split in ("train_idx", "val_idx", "test_idx"):
            ids = getattr(graph, split)
            if ids is not None:
                glob[split] = ids.long().numpy()
        arrays = save_arrays(tmp, glob)
        # the book without edge_part: every part's edges are in its own folder
        PartitionBook(k, book.kind, book.part, book.mirror_ids, book.mirror_ptr,
                      edge_part=torch.zeros(0, dtype=torch.int64), quality=book.quality,
                      meta={**book.meta, "edge_part": "in each part's folder"}
                      ).save(tmp / BOOK_DIR)
        ep, src = edge_part(book).long(), edge_src(graph)
        keys = {"bcast": mirror_keys(ep, src, book.part, n),
                "reduce": mirror_keys(ep, _dst(graph), book.part, n)}
        del ep, src
        sync = {d: bool(keys[d].numel()) for d in SYNCS}
        parts, sizes = [], []
        for q in range(k):  # one part at a time: gathered, written, dropped
            folder = part_dir(tmp, q)
            listed = save_arrays(folder, vc_part_arrays(graph, book, q, keys))
            info = write_info(folder, {"format": LAYOUT_FORMAT, "part": q, **identity,
                                        "kind": book.kind, "sync": sync,
                                        "num_owned": listed["masters"]["shape"][0],
                                        "num_edges": listed["indices"]["shape"][0],
                                        "arrays": listed}, PART_FILE)
            parts.append(info["checksum"])
            sizes.append(sum(f.stat().st_size for f in folder.iterdir()))
        layout = write_info(tmp, {
            "format": LAYOUT_FORMAT, **identity, "kind": book.kind,
            "partitioner_config": partitioner, "dataset": dataset_identity(dataset),
            "graph": {"name": graph.name, "num_nodes": n, "num_edges": graph.num_edges,
                      "num_features": graph.num_features, "num_classes": graph.num_classes},
            "dataset_meta": asdict(DatasetMeta.of(graph)), "quality": book.quality,
            "parts": parts, "part_bytes": sizes, "arrays": arrays}, LAYOUT_FILE)
        publish_folder(tmp, out, LAYOUT_FILE, replace=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(f"parts: wrote {k} vertex-cut parts of {graph.name} to {out} "
        f"({', '.join(f'{b / 2**20:.1f}' for b in sizes)} MiB each)")
    return layout


@dataclass(eq=False)
class VertexCutPart(PartGraph):
    """One part of a vertex-cut layout as a graph in the global id space (module docstring):
    its edges, the rows it reads and its masters' labels."""

    #: the whole graph's CSC positions of the held edges, in held order
    edge_ids: torch.Tensor | None = None
    #: per direction (:data:`SYNCS`): this part's mirror list, ``holder * N + node``
    sync_keys: dict = field(default_factory=dict)
    #: per direction: whether any part sends anything (the same on every rank)
    sync_active: dict = field(default_factory=dict)

    def global_edge_ids(self) -> torch.Tensor:
        """The whole graph's edge id (CSC position) of every held edge, in held order."""
        if self.edge_ids is None:
            raise ValueError(f"part {self.part} of {self.meta.get('parts')} was opened "
                             "without its edge ids")
        return self.edge_ids


def open_vc_part(layout: Any, part: int) -> VertexCutPart:
    """Part ``part`` of the vertex-cut layout ``layout`` (a
    :class:`~gnnscale.partition.parts.PartLayout`) as a :class:`VertexCutPart` (only the
    global arrays and its folder read)."""
    info = layout.info
    folder = part_dir(layout.root, part)
    layout.opened.append(folder / PART_FILE)
    pinfo = read_part(layout.root, part, info)
    if pinfo.get("kind") != "vertex_cut":
        raise LayoutError(f"{folder / PART_FILE} is not a part of a vertex-cut layout, "
                          f"{layout.root / LAYOUT_FILE} is: copy the parts written with it")
    glob = {k: torch.from_numpy(a) for k, a in
            layout._arrays(layout.root, info["arrays"], LAYOUT_FILE).items()}
    own = {k: torch.from_numpy(a) for k, a in
           layout._arrays(folder, pinfo["arrays"], PART_FILE).items()}
    g = info["graph"]
    n = int(g["num_nodes"])
    indptr = torch.zeros(n + 1, dtype=torch.int64)  # over all N: empty where it holds none
    indptr[own["targets"] + 1] = own["indptr"][1:] - own["indptr"][:-1]
    indptr = torch.cumsum(indptr, 0)
    where = f"part {part} of {layout.root}"
    views: dict[str, Any] = {k: RowView(own[k], own[held], n, what, where)
             for k, held, what in (("x", "read", "feature"), ("y", "masters", "label"))
             if k in own}
    return VertexCutPart(
        indptr=indptr, indices=own["indices"], **views,
        edge_weight=own.get("edge_weight"), edge_attr=own.get("edge_attr"),
        train_idx=glob.get("train_idx"), val_idx=glob.get("val_idx"),
        test_idx=glob.get("test_idx"), num_classes=int(g["num_classes"]), name=g["name"],
        meta={"checksum": info["graph_checksum"], "parts": str(layout.root), "part": part},
        part=part, owned=own["masters"], whole_indptr=glob["indptr"],
        whole_edges=int(g["num_edges"]), layout=layout, edge_ids=own["edge_ids"],
        sync_keys={d: own[f"{d}_keys"] for d in SYNCS},
        sync_active={d: bool(pinfo["sync"][d]) for d in SYNCS})
