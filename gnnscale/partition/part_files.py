"""The base both kinds of partitioned layout share (the edge-cut one,
:mod:`gnnscale.partition.parts`, and the vertex-cut one, :mod:`gnnscale.partition.vc_parts`):
writing a part's arrays and a verified info file, the checks before a layout is written, and a
part opened as a graph in the global id space (:class:`PartGraph`, its rows held in
:class:`RowView` s)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnscale.data.graph import EdgeType, GraphStore
from gnnscale.data.processed import array_digest, write_stamp
from gnnscale.errors import UserError
from gnnscale.partition.book import PartitionBook
from gnnscale.partition.layout import LAYOUT_FILE, info_checksum


class NotHeldError(UserError, IndexError):
    """A row of a node that this host's part does not hold was read."""


def save_arrays(folder: Path, arrays: dict[str, np.ndarray]) -> dict[str, dict]:
    """Write each array as ``<name>.npy``; returns ``{name: {shape, dtype, sha256}}``."""
    folder.mkdir(parents=True, exist_ok=True)
    listed = {}
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        np.save(folder / f"{name}.npy", a)
        listed[name] = {"shape": list(a.shape), "dtype": a.dtype.str, "sha256": array_digest(a)}
    return listed


def write_info(folder: Path, info: dict, file: str) -> dict:
    """Write ``info`` (with its checksum) as ``folder/file`` and stamp the folder verified."""
    info = json.loads(json.dumps(info, default=str))  # what a load reads back
    info["checksum"] = info_checksum(info)
    (folder / file).write_text(json.dumps(info, indent=1))
    write_stamp(folder, [file, *(f"{n}.npy" for n in info.get("arrays", {}))], settle=True)
    return info


def with_rows(graph: GraphStore, out: dict[str, torch.Tensor], x_ids: torch.Tensor,
              y_ids: torch.Tensor, eids: torch.Tensor) -> dict[str, np.ndarray]:
    """``out`` plus the rows a part holds (``x`` of ``x_ids``, ``y`` of ``y_ids``, the edge
    weights and features of ``eids``: those the graph has), as numpy arrays to write."""
    for name, rows, ids in (("x", graph.x, x_ids), ("y", graph.y, y_ids),
                            ("edge_weight", graph.edge_weight, eids),
                            ("edge_attr", graph.edge_attr, eids)):
        if rows is not None:
            out[name] = rows[ids]
    return {k: v.numpy() for k, v in out.items()}


def check_writable(graph: GraphStore, book: PartitionBook, out: Path) -> None:
    """Refuse, in one line, a typed graph, a book of another graph (its nodes, and for a
    vertex-cut its edges) and an ``out`` folder that holds something other than a layout."""
    if graph.is_typed or graph.type_features or graph.type_edge_attr:
        raise UserError(f"{graph.name} is a typed graph; the partitioned layout writes "
                        "homogeneous graphs only so far: train it from the processed dataset")
    cut = book.edge_part if book.kind == "vertex_cut" else None  # a vertex-cut's edges
    edges = cut is not None and cut.numel() != graph.num_edges
    if book.num_nodes != graph.num_nodes or edges:
        what = f"{book.num_nodes} nodes" + (f" and {cut.numel()} edges" if cut is not None
                                            else "")
        has = f"{graph.num_nodes}" + (f" and {graph.num_edges}" if book.kind == "vertex_cut"
                                      else "")
        raise UserError(f"the partition book covers {what}, {graph.name} has {has}: it "
                        "belongs to another graph")
    if out.exists() and not (out / LAYOUT_FILE).is_file() and any(out.iterdir()):
        raise UserError(f"parts={out} exists and is not a partitioned layout: give a new or "
                        "empty folder (a layout there is replaced)")


class RowView:
    """Rows of a per-node array that a part holds (``held``: their global ids, ascending),
    indexed by GLOBAL id like the whole array (``shape[0]`` is the graph's node count); asking
    for a row it does not hold is a :class:`NotHeldError` naming the node."""

    def __init__(self, rows: torch.Tensor, held: torch.Tensor, num_nodes: int, what: str,
                 where: str, owner: torch.Tensor | None = None) -> None:
        self.rows, self.held, self.num_nodes = rows, held, num_nodes
        self.what, self.where = what, where
        #: every node's part (the book's), when the other rows can be fetched from their owners
        self.owner = owner
        #: how the other rows are fetched when their owners answer at any time (a
        #: :class:`~gnnscale.cache.served.ServedExchange`, set by ``strategy=factored``); None:
        #: collectively, over the caller's group
        self.remote: Any = None

    @property
    def shape(self) -> torch.Size:
        """The whole array's shape: ``[num_nodes, ...]``."""
        return torch.Size((self.num_nodes, *self.rows.shape[1:]))

    @property
    def dtype(self) -> torch.dtype:
        """The rows' dtype."""
        return self.rows.dtype

    def dim(self) -> int:
        """Dimensions of the whole array."""
        return self.rows.dim()

    def element_size(self) -> int:
        """Bytes of one element."""
        return self.rows.element_size()

    def new_zeros(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        """As ``Tensor.new_zeros`` of the rows."""
        return self.rows.new_zeros(*args, **kwargs)

    def holds(self, ids: torch.Tensor) -> torch.Tensor:
        """Whether each of the global ``ids`` is a row this view holds (bool, ``ids``' shape)."""
        ids = ids.long()
        pos = torch.searchsorted(self.held, ids).clamp_(max=max(self.held.numel() - 1, 0))
        if not self.held.numel():
            return torch.zeros(ids.shape, dtype=torch.bool)
        return self.held[pos] == ids

    def size(self, d: int | None = None) -> torch.Size | int:
        """As ``Tensor.size``."""
        return self.shape if d is None else self.shape[d]

    def __len__(self) -> int:
        return self.num_nodes

    def positions(self, ids: torch.Tensor) -> torch.Tensor:
        """Row positions of the global ``ids`` (all held, else :class:`NotHeldError`)."""
        ids = ids.long()
        pos = torch.searchsorted(self.held, ids)
        ok = pos < self.held.numel()
        ok[ok.clone()] = self.held[pos[ok]] == ids[ok]
        if not bool(ok.all()):
            bad = ids[~ok]
            raise NotHeldError(
                f"node {int(bad[0])}'s {self.what} row is not on this host ({bad.numel()} of "
                f"the {ids.numel()} rows asked for are not): {self.where} holds the rows of its "
                f"{self.held.numel()} own nodes only; another node's row comes from its owner "
                "(the feature store's remote tier), or drop parts= to read the whole dataset")
        return pos

    def __getitem__(self, idx: Any) -> torch.Tensor:
        if isinstance(idx, slice):
            idx = torch.arange(self.num_nodes)[idx]
        if isinstance(idx, int | np.integer):
            return self.rows[self.positions(torch.tensor([int(idx)]))[0]]
        ids = torch.as_tensor(idx)
        if ids.dtype == torch.bool:
            ids = ids.nonzero().flatten()
        return self.rows[self.positions(ids.reshape(-1)).reshape(ids.shape)]


@dataclass(eq=False)
class PartGraph(GraphStore):
    """One part of a partitioned layout as a graph in the global id space (module docstring)."""

    part: int = 0
    #: global ids of the nodes this part owns, ascending
    owned: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.int64))
    #: the whole graph's CSC indptr: its in-degrees, and the global ids of the held edges
    whole_indptr: torch.Tensor = field(
        default_factory=lambda: torch.zeros(1, dtype=torch.int64))
    whole_edges: int = -1
    layout: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        whole, self.whole_edges = self.whole_edges, -1  # the checks read the held arrays
        super().__post_init__()
        self.whole_edges = whole

    @property
    def num_edges(self) -> int:
        """Edges of the whole graph (:attr:`held_edges`: those this part holds)."""
        return self.whole_edges if self.whole_edges >= 0 else self.indices.numel()

    @property
    def held_edges(self) -> int:
        """The in-edges of the owned nodes (what ``indices`` holds)."""
        return self.indices.numel()

    def in_degree(self) -> torch.Tensor:
        """Every node's in-degree in the whole graph."""
        return self.whole_indptr[1:] - self.whole_indptr[:-1]

    def out_degree(self) -> torch.Tensor:
        """Not known from one part (it needs every edge): a :class:`NotHeldError`."""
        raise NotHeldError(f"out-degrees need every edge of {self.name}; part {self.part} of "
                           f"{self.meta.get('parts')} holds its own in-edges only")

    def edge_index(self) -> torch.Tensor:
        """COO ``[2, E_held]`` of the held in-edges (global ids)."""
        deg = self.indptr[1:] - self.indptr[:-1]
        dst = torch.repeat_interleave(torch.arange(self.num_nodes), deg)
        return torch.stack([self.indices.long(), dst])

    def global_edge_ids(self) -> torch.Tensor:
        """The whole graph's edge id (CSC position) of every held edge, in held order."""
        own = self.owned
        start = self.whole_indptr[own]
        deg = self.indptr[own + 1] - self.indptr[own]
        local = torch.zeros(own.numel(), dtype=torch.int64)
        local[1:] = torch.cumsum(deg, 0)[:-1]
        return torch.repeat_interleave(start - local, deg) + torch.arange(self.held_edges)

    def edge_type_csc(self, edge_type: EdgeType
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The one edge type's ``(indptr, indices, global edge ids)`` of the held edges."""
        self.edge_type_index(edge_type)
        return self.indptr, self.indices, self.global_edge_ids()
