"""The graph store: a CSC graph with node and edge types, features, labels and splits.

CSC means ``indptr`` runs over destinations and ``indices`` holds the sources, so the
in-neighbors of ``v`` are ``indices[indptr[v]:indptr[v + 1]]`` -- exactly what a GNN layer
aggregates. Arrays are plain tensors; loaded from the processed format they are memory-mapped
copy-on-write, so ranks spawned on one host share the pages instead of copying them.

Typed graphs use the same arrays: ONE global id space and ONE fused CSC. Node types are
contiguous id ranges (``node_types``, ``node_type_offset``: type ``t`` holds the global ids
``[offset[t], offset[t + 1])``); edge types are ``(source type, relation, destination type)``
triples, and ``type_per_edge`` (int16, CSC order) names each edge's type when there are several.
Within each destination the in-edges are grouped by edge type (and, as the builders write them,
sorted by source within it), so the in-edges of one type are a contiguous slice of each
destination's: :meth:`GraphStore.edge_type_csc` gathers them into that type's own CSC. The CSC
position of an edge is its edge id. A homogeneous graph is the one-type case: node type
``"node"``, edge type ``("node", "to", "node")``, no ``type_per_edge``; its arrays, and every
reader of ``indptr``/``indices``/``x``/``y``, are what they always were.

Features: ``x`` is one ``[N, F]`` matrix when every node type has features of one width (then
``features[t]`` are row slices of it, views); otherwise ``x`` is None and ``type_features``
holds each featured type's own matrix. :attr:`GraphStore.features` reads either way. Labels
``y`` run over all ``N`` global ids (-1 on nodes without a label); ``target_types`` are the
types that carry labels and splits; splits are global ids inside a target type's range (a
typed graph without target types, link prediction's message graph, may hold splits of any
type: its training endpoints).

Edge features follow the same rule: ``edge_attr`` is one ``[E, D]`` matrix in CSC order (row
``e`` belongs to edge id ``e``, like ``edge_weight``) when every edge type has edge features of
one width and dtype; otherwise ``edge_attr`` is None and ``type_edge_attr`` holds each featured
edge type's ``[E_type, D_type]`` rows in that type's edge id order (the order of
``edge_type_csc(type)[2]``). :attr:`GraphStore.edge_attrs` reads either way. A graph without
edge features has neither, and nothing about it changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

from gnnscale.data import bounded
from gnnscale.data.bounded import KEY_LIMIT
from gnnscale.data.pages import release

if TYPE_CHECKING:
    from typing_extensions import TypeIs

SELF_LOOP_MODES = ("keep", "remove", "add")
#: Link-prediction split edges a graph may carry (``GraphStore.links``), each ``[2, E]`` int64.
LINK_ARRAYS = ("train_pos", "val_pos", "val_neg", "test_pos", "test_neg")
#: The node type of a homogeneous graph, and its one edge type.
NODE = "node"
EDGE = (NODE, "to", NODE)
#: What a node type may be named (it names a file of the processed format: ``x__<type>.npy``).
TYPE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
#: The relation of the reverse of edge type ``(s, r, d)`` is ``REVERSE + r``: ``(d, rev_r, s)``.
REVERSE = "rev_"

EdgeType = tuple[str, str, str]
#: edges checked (or counted) at a time by the whole-graph checks of a typed graph
CHECK_EDGES = 1 << 20
#: The default of the :class:`GraphStore` fields its ``__post_init__`` derives when they are
#: left out (``node_type_offset``, ``edge_types``, ``target_types``): None until then, typed
#: ``Any`` so that the fields read as what every constructed graph holds.
DERIVED: Any = None


class EdgeChunks(Protocol):
    """Edges read in chunks, never whole at once: what
    :class:`gnnscale.data.bounded.EdgeSource` is (a ``[2, E]`` list on disk)."""

    @property
    def num_edges(self) -> int:
        """Edges in the list."""
        ...

    @property
    def shape(self) -> tuple[int, ...]:
        """``(2, num_edges)``."""
        ...

    def chunks(self, rows: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(sources, destinations)`` chunks of at most ``rows`` edges, in order."""
        ...

    def span(self) -> tuple[int, int, int, int] | None:
        """``(min source, max source, min destination, max destination)``, None: no edges."""
        ...

    def whole(self) -> torch.Tensor:
        """All the edges in memory, ``[2, E]`` int64."""
        ...


class RowChunks(Protocol):
    """Edge feature rows read in chunks: what :class:`gnnscale.data.bounded.RowSource` is."""

    @property
    def shape(self) -> tuple[int, ...]:
        """``(rows, width)``."""
        ...

    @property
    def dtype(self) -> np.dtype:
        """The rows' numpy dtype."""
        ...

    def chunks(self, rows: int) -> Iterator[np.ndarray]:
        """``[k, D]`` chunks of at most ``rows`` rows, in order."""
        ...

    def whole(self) -> torch.Tensor:
        """All the rows in memory."""
        ...


def check_csc(indptr: torch.Tensor, indices: torch.Tensor, num_nodes: int) -> None:
    """CSC invariants the native ops rely on: ``indptr`` starts at 0 and never decreases,
    ``indices`` lie in ``[0, num_nodes)``. Raises ``ValueError`` saying which one fails."""
    if int(indptr[0]) != 0:
        raise ValueError(f"indptr[0] = {int(indptr[0])}, must be 0")
    if num_nodes and bool((indptr[1:] < indptr[:-1]).any()):
        at = int((indptr[1:] < indptr[:-1]).nonzero()[0])
        raise ValueError(f"indptr decreases at vertex {at} ({int(indptr[at])} -> "
                         f"{int(indptr[at + 1])}): it must be non-decreasing")
    _check_range(indices, num_nodes, "indices hold")


def check_ids(ids: torch.Tensor | None, num_nodes: int, what: str) -> None:
    """``ids`` (a split) must be an integer id list in ``[0, num_nodes)``."""
    if ids is None:
        return
    if ids.is_floating_point() or ids.dtype == torch.bool or ids.dim() != 1:
        raise ValueError(f"{what} must be a 1-D integer id list, got {ids.dtype} "
                         f"{tuple(ids.shape)}")
    _check_range(ids, num_nodes, f"{what} holds")


def _check_range(ids: torch.Tensor, num_nodes: int, subject: str) -> None:
    """Every id in ``[0, num_nodes)``, else a ValueError: ``<subject> ids in [lo, hi] ...``."""
    if ids.numel():
        if ids.dim() == 1 and ids.numel() > CHECK_EDGES:  # a chunk at a time, pages given back
            lo, hi = _chunked_aminmax(ids)
        else:
            m, x = torch.aminmax(ids)
            lo, hi = int(m), int(x)
        if int(lo) < 0 or int(hi) >= num_nodes:
            raise ValueError(f"{subject} ids in [{int(lo)}, {int(hi)}] but there are "
                             f"{num_nodes} nodes")


def _chunked_aminmax(a: torch.Tensor) -> tuple[int, int]:
    """``(min, max)`` of a 1-D tensor read :data:`CHECK_EDGES` values at a time, the pages of
    each chunk of a mapped file given back once read (:func:`gnnscale.data.pages.release`)."""
    lows, highs = [], []
    for c in range(0, a.numel(), CHECK_EDGES):
        m, x = torch.aminmax(a[c:c + CHECK_EDGES])
        lows.append(int(m))
        highs.append(int(x))
        release(a, c, c + CHECK_EDGES)
    return min(lows), max(highs)


def check_link_edges(edges: torch.Tensor, num_nodes: int, name: str) -> None:
    """A link split's edge array: ``[2, E]`` integer ids in ``[0, num_nodes)``."""
    if name not in LINK_ARRAYS:
        raise ValueError(f"unknown link split array {name!r}; known: {', '.join(LINK_ARRAYS)}")
    if edges.dim() != 2 or edges.shape[0] != 2:
        raise ValueError(f"{name} must have shape [2, E], got {tuple(edges.shape)}")
    if edges.is_floating_point() or edges.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer node ids, got {edges.dtype}")
    _check_range(edges, num_nodes, f"{name} holds")


def check_node_types(node_types: tuple[str, ...]) -> None:
    """Node type names: at least one, unique, each a :data:`TYPE_NAME`."""
    if not node_types:
        raise ValueError("node_types is empty: a graph has at least one node type")
    for t in node_types:
        if not isinstance(t, str) or not TYPE_NAME.fullmatch(t):
            raise ValueError(f"node type name {t!r} must be letters, digits, '_', '.' or '-' "
                             "(not starting with '.' or '-'): it names a file")
    if len(set(node_types)) != len(node_types):
        raise ValueError(f"node_types {list(node_types)} names a type twice")


def check_edge_types(edge_types: tuple[tuple[str, ...], ...], node_types: tuple[str, ...]
                     ) -> tuple[EdgeType, ...]:
    """Edge types: ``(source type, relation, destination type)`` triples of known node types,
    none twice; returned as triples."""
    if not edge_types:
        raise ValueError("edge_types is empty: a graph has at least one edge type")
    triples = []
    for et in edge_types:
        if len(et) != 3 or not all(isinstance(p, str) and p for p in et):
            raise ValueError(f"edge type {et!r} must be a (source type, relation, destination "
                             "type) triple of non-empty strings")
        for end in (et[0], et[2]):
            if end not in node_types:
                raise ValueError(f"edge type {et} names node type {end!r}, which is not one of "
                                 f"the node types ({', '.join(node_types)})")
        triples.append((et[0], et[1], et[2]))
    if len(set(triples)) != len(triples):
        raise ValueError(f"edge_types {list(edge_types)} names a type twice")
    return tuple(triples)


@dataclass
class GraphStore:
    """A graph in CSC form plus everything a node-classification run needs; ``links`` holds
    a link-prediction split's edges when the dataset provides one (:data:`LINK_ARRAYS`).
    The type fields are described in the module docstring; left out, the graph is homogeneous.
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    x: torch.Tensor | None = None
    y: torch.Tensor | None = None
    train_idx: torch.Tensor | None = None
    val_idx: torch.Tensor | None = None
    test_idx: torch.Tensor | None = None
    edge_weight: torch.Tensor | None = None
    num_classes: int = 0
    name: str = "graph"
    meta: dict = field(default_factory=dict)
    links: dict[str, torch.Tensor] = field(default_factory=dict)
    node_types: tuple[str, ...] = (NODE,)
    #: int64 ``[T + 1]``: type ``t`` holds global ids ``[offset[t], offset[t + 1])``
    #: (left out: ``[0, N]`` of a one-type graph)
    node_type_offset: torch.Tensor = DERIVED
    #: left out: the one edge type ``(t, "to", t)`` of a one-type graph
    edge_types: tuple[EdgeType, ...] = DERIVED
    #: int16 ``[E]`` in CSC order (an index into ``edge_types``); None with one edge type
    type_per_edge: torch.Tensor | None = None
    #: ``{type: [num_nodes_of(type), F_type]}`` when there is no single ``x``
    type_features: dict[str, torch.Tensor] = field(default_factory=dict)
    #: the node types that carry labels and splits (left out: the one type of a one-type
    #: graph, none of a typed one)
    target_types: tuple[str, ...] = DERIVED
    #: ``[E, D]`` edge features in CSC order (every edge type featured, one width and dtype)
    edge_attr: torch.Tensor | None = None
    #: ``{edge type: [E_type, D]}`` in that type's edge id order, when there is no one edge_attr
    type_edge_attr: dict[EdgeType, torch.Tensor] = field(default_factory=dict)
    _type_csc: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.indptr.dtype != torch.int64:
            raise TypeError(f"indptr must be int64, got {self.indptr.dtype}")
        if self.indices.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"indices must be int64 or int32, got {self.indices.dtype}")
        if self.indptr.dim() != 1 or self.indptr.numel() < 1:
            raise ValueError("indptr must be a 1-D tensor of length num_nodes + 1")
        if int(self.indptr[-1]) != self.indices.numel():
            raise ValueError(
                f"indptr[-1] = {int(self.indptr[-1])} but there are {self.indices.numel()} indices"
            )
        n = self.num_nodes
        check_csc(self.indptr, self.indices, n)
        self._check_types(n)
        if self.x is None and len(self.node_types) == 1 and \
                list(self.type_features) == [self.node_types[0]]:  # one type: its features are x
            self.x, self.type_features = self.type_features[self.node_types[0]], {}
        for split in ("train_idx", "val_idx", "test_idx"):
            check_ids(getattr(self, split), n, split)
        if self.x is not None and self.x.shape[0] != n:
            raise ValueError(f"x has {self.x.shape[0]} rows for {n} nodes")
        if self.y is not None and self.y.shape[0] != n:
            raise ValueError(f"y has {self.y.shape[0]} entries for {n} nodes")
        if self.edge_weight is not None and self.edge_weight.numel() != self.num_edges:
            raise ValueError("edge_weight must have one entry per edge")
        for name, edges in self.links.items():
            check_link_edges(edges, n, name)
        self._check_type_features()
        self._check_targets()
        if self.edge_attr is not None or self.type_edge_attr:
            self._check_edge_attr()

    # ---- type checks (a homogeneous graph passes each in O(1)) ------------------------------

    def _check_types(self, n: int) -> None:
        self.node_types = tuple(self.node_types)
        check_node_types(self.node_types)
        one = len(self.node_types) == 1
        if self.node_type_offset is None:
            if not one:
                raise ValueError(f"node_type_offset is needed with {len(self.node_types)} node "
                                 "types: type t holds the global ids [offset[t], offset[t + 1])")
            self.node_type_offset = torch.tensor([0, n], dtype=torch.int64)
        off = self.node_type_offset
        if off.dtype != torch.int64 or off.dim() != 1 or off.numel() != len(self.node_types) + 1:
            raise ValueError(f"node_type_offset must be int64 [{len(self.node_types) + 1}] (one "
                             f"more than the node types), got {off.dtype} {tuple(off.shape)}")
        if int(off[0]) != 0 or int(off[-1]) != n or bool((off[1:] < off[:-1]).any()):
            raise ValueError(f"node_type_offset {off.tolist()} must rise from 0 to the {n} "
                             "nodes")
        if self.edge_types is None:
            if not one:
                raise ValueError(f"edge_types is needed with {len(self.node_types)} node types")
            self.edge_types = ((self.node_types[0], EDGE[1], self.node_types[0]),)
        self.edge_types = check_edge_types(tuple(tuple(et) for et in self.edge_types),
                                           self.node_types)
        tpe = self.type_per_edge
        if len(self.edge_types) == 1:
            if tpe is not None:
                raise ValueError("type_per_edge is for several edge types; with one it is None")
        elif tpe is None:
            raise ValueError(f"type_per_edge is needed with {len(self.edge_types)} edge types")
        elif tpe.dtype != torch.int16 or tpe.dim() != 1 or tpe.numel() != self.num_edges:
            raise ValueError(f"type_per_edge must be int16 [{self.num_edges}] (one per edge), "
                             f"got {tpe.dtype} {tuple(tpe.shape)}")
        if self.is_typed:
            self._check_typed_edges()

    def _check_typed_edges(self) -> None:
        """Every edge joins nodes of its type's two node types; in-edges grouped by type."""
        off, k = self.node_type_offset, len(self.edge_types)
        tix = {t: i for i, t in enumerate(self.node_types)}
        src_t = torch.tensor([tix[et[0]] for et in self.edge_types])
        dst_t = torch.tensor([tix[et[2]] for et in self.edge_types])
        indptr, tpe = self.indptr, self.type_per_edge
        if tpe is not None:
            lo, hi = _chunked_aminmax(tpe) if tpe.numel() else (0, 0)
            if lo < 0 or hi >= k:
                raise ValueError(f"type_per_edge holds [{lo}, {hi}] but there are "
                                 f"{k} edge types")
        step = CHECK_EDGES  # a chunk of edges at a time: no per-edge array of the graph's size
        for d, t in enumerate(self.node_types):  # the in-edges of type t's nodes: one slice
            a, b = int(indptr[off[d]]), int(indptr[off[d + 1]])
            for c in range(a, b, step):
                types = torch.zeros(min(step, b - c), dtype=torch.long) if tpe is None else \
                    tpe[c:min(b, c + step)].long()
                release(tpe, c, min(b, c + step))
                wrong = dst_t[types] != d
                if bool(wrong.any()):
                    et = self.edge_types[int(types[wrong][0])]
                    raise ValueError(f"an edge of type {et} ends at a node of type {t!r}; edges "
                                     f"of that type end at {et[2]!r} nodes")
        for c in range(0, self.num_edges, step):
            c1 = min(self.num_edges, c + step)
            types = torch.zeros(c1 - c, dtype=torch.long) if tpe is None else tpe[c:c1].long()
            src = self.indices[c:c1].long()  # int64 indices: a view of the mapped file
            bad = (src < off[src_t][types]) | (src >= off[src_t + 1][types])
            release(tpe, c, c1)  # this chunk's pages given back once read
            release(self.indices, c, c1)
            if bool(bad.any()):
                break
        else:
            bad = None
        if bad is not None:
            e = int(bad.nonzero()[0])
            et, s = self.edge_types[int(types[e])], int(src[e])
            e += c
            st = self.node_types[int(self.node_type_of(torch.tensor([s]))[0])]
            raise ValueError(f"edge {e} of type {et} starts at node {s} of type {st!r}; edges "
                             f"of that type start at {et[0]!r} nodes (global ids "
                             f"[{int(off[tix[et[0]]])}, {int(off[tix[et[0]] + 1])}))")
        if tpe is not None:
            self._check_grouped(tpe)

    def _check_grouped(self, tpe: torch.Tensor) -> None:
        """The in-edges of each destination grouped by edge type (``tpe``: type_per_edge)."""
        indptr, step = self.indptr, CHECK_EDGES
        for c in range(1, self.num_edges, step):
            c1 = min(self.num_edges, c + step)  # edges [c, c1) against the ones before them
            down = (tpe[c:c1] < tpe[c - 1:c1 - 1]).nonzero().reshape(-1) + c
            release(tpe, c - 1, c1 - 1)
            if not down.numel():
                continue
            # a type may fall only where a destination's in-edges start
            at = torch.searchsorted(indptr, down)
            starts = (at < indptr.numel()) & (indptr[at.clamp(max=indptr.numel() - 1)] == down)
            unsorted = down[~starts]
            if unsorted.numel():
                e = int(unsorted[0])
                v = int(torch.searchsorted(indptr, torch.tensor(e), right=True)) - 1
                raise ValueError(f"the in-edges of node {v} are not grouped by edge type "
                                 f"(edge {e}): within each destination they are sorted by "
                                 "(edge type, source)")

    def _check_type_features(self) -> None:
        if not self.type_features:
            return
        if self.x is not None:
            raise ValueError("give one feature matrix x or per-type type_features, not both")
        for t, f in self.type_features.items():
            if t not in self.node_types:
                raise ValueError(f"type_features names node type {t!r}, which is not one of the "
                                 f"node types ({', '.join(self.node_types)})")
            if f.dim() != 2 or f.shape[0] != self.num_nodes_of(t):
                raise ValueError(f"features[{t!r}] has shape {tuple(f.shape)}: "
                                 f"{self.num_nodes_of(t)} rows expected, one per {t!r} node")

    def _check_edge_attr(self) -> None:
        """Edge features: one ``[E, D]`` matrix, or per edge type ``[E_type, D]`` rows."""
        self.type_edge_attr = {self._attr_type(et): a for et, a in self.type_edge_attr.items()}
        if self.edge_attr is None and len(self.edge_types) == 1 and \
                list(self.type_edge_attr) == [self.edge_types[0]]:  # one type: its attrs
            self.edge_attr, self.type_edge_attr = self.type_edge_attr[self.edge_types[0]], {}
        if self.edge_attr is not None:
            if self.type_edge_attr:
                raise ValueError("give one edge feature matrix edge_attr or per-type "
                                 "type_edge_attr, not both")
            a = self.edge_attr
            if a.dim() != 2 or a.shape[0] != self.num_edges:
                raise ValueError(f"edge_attr has shape {tuple(a.shape)}: [{self.num_edges}, D] "
                                 "expected, one row per edge (CSC order)")
            return
        counts = self.num_edges_per_type()
        for et, a in self.type_edge_attr.items():
            if et not in self.edge_types:
                raise ValueError(f"type_edge_attr names edge type {et}, which is not one of "
                                 f"the edge types {list(self.edge_types)}")
            rows = counts[self.edge_types.index(et)]
            if a.dim() != 2 or a.shape[0] != rows:
                raise ValueError(f"edge_attr[{et}] has shape {tuple(a.shape)}: {rows} rows "
                                 "expected, one per edge of that type")

    def _attr_type(self, et: tuple[str, ...]) -> EdgeType:
        """A key of ``type_edge_attr`` as an edge type triple (ValueError: not an edge type)."""
        if len(et) != 3:
            raise ValueError(f"type_edge_attr names edge type {tuple(et)}, which is not one of "
                             f"the edge types {list(self.edge_types)}")
        return (et[0], et[1], et[2])

    def _check_targets(self) -> None:
        if self.target_types is None:
            if len(self.node_types) == 1:
                self.target_types = self.node_types
                return
            if self.y is not None:
                raise ValueError("a graph with several node types and labels (y) names its "
                                 "target_types: the types whose nodes carry labels")
            self.target_types = ()
        self.target_types = tuple(self.target_types)
        for t in self.target_types:
            if t not in self.node_types:
                raise ValueError(f"target type {t!r} is not one of the node types "
                                 f"({', '.join(self.node_types)})")
            if self.y is None:
                raise ValueError(f"target type {t!r} has no labels: y is None")
            if self.is_typed:
                lo, hi = self._range(t)
                if hi > lo and not bool((self.y[lo:hi] >= 0).any()):
                    raise ValueError(f"target type {t!r} has no labels: y is -1 on all its "
                                     f"{hi - lo} nodes")
        if set(self.target_types) == set(self.node_types) or not self.target_types:
            return  # no target type: splits of any type (link prediction's training endpoints)
        allowed = torch.zeros(len(self.node_types), dtype=torch.bool)
        allowed[[self.node_types.index(t) for t in self.target_types]] = True
        for split in ("train_idx", "val_idx", "test_idx"):
            ids = getattr(self, split)
            if ids is None or not ids.numel():
                continue
            types = self.node_type_of(ids)
            bad = ~allowed[types]
            if bool(bad.any()):
                i = int(bad.nonzero()[0])
                raise ValueError(f"{split} holds node {int(ids[i])} of type "
                                 f"{self.node_types[int(types[i])]!r}, which is not a target "
                                 f"type ({', '.join(self.target_types) or 'none'})")

    # ---- sizes -------------------------------------------------------------------------------

    @property
    def num_nodes(self) -> int:
        """Vertices in the graph."""
        return self.indptr.numel() - 1

    @property
    def num_edges(self) -> int:
        """Edges (directed, as stored)."""
        return self.indices.numel()

    @property
    def num_features(self) -> int:
        """Feature columns of ``x`` (0 without one; see :attr:`feature_dims` for per type)."""
        return 0 if self.x is None else int(self.x.shape[1])

    @property
    def is_typed(self) -> bool:
        """More than one node type or more than one edge type."""
        return len(self.node_types) > 1 or len(self.edge_types) > 1

    def num_nodes_of(self, node_type: str) -> int:
        """Nodes of ``node_type``."""
        lo, hi = self._range(node_type)
        return hi - lo

    def num_edges_per_type(self) -> list[int]:
        """Edges of each edge type, in ``edge_types`` order."""
        if self.type_per_edge is None:
            return [self.num_edges]
        counts = torch.zeros(len(self.edge_types), dtype=torch.int64)
        for c in range(0, self.num_edges, CHECK_EDGES):  # no int64 copy of every edge's type
            counts += torch.bincount(self.type_per_edge[c:c + CHECK_EDGES].long(),
                                     minlength=len(self.edge_types))
            release(self.type_per_edge, c, c + CHECK_EDGES)
        return counts.tolist()

    # ---- ids ---------------------------------------------------------------------------------

    def _type_index(self, node_type: str) -> int:
        try:
            return self.node_types.index(node_type)
        except ValueError:
            raise ValueError(f"unknown node type {node_type!r}; the node types are "
                             f"{', '.join(self.node_types)}") from None

    def _range(self, node_type: str) -> tuple[int, int]:
        """Global ids ``[lo, hi)`` of ``node_type``."""
        i = self._type_index(node_type)
        return int(self.node_type_offset[i]), int(self.node_type_offset[i + 1])

    def node_type_of(self, ids: torch.Tensor) -> torch.Tensor:
        """The node type (an index into ``node_types``, int64) of every global id in ``ids``."""
        return torch.searchsorted(self.node_type_offset[1:-1], ids.long(), right=True)

    def to_local(self, node_type: str, ids: torch.Tensor) -> torch.Tensor:
        """Type-local ids of the global ``ids``, which must all be of ``node_type``."""
        lo, hi = self._range(node_type)
        _check_span(ids, lo, hi, f"global ids of node type {node_type!r}")
        return ids.long() - lo

    def to_global(self, node_type: str, local: torch.Tensor) -> torch.Tensor:
        """Global ids of the ``node_type``-local ids ``local``."""
        lo, hi = self._range(node_type)
        _check_span(local, 0, hi - lo, f"local ids of node type {node_type!r}")
        return local.long() + lo

    # ---- per-type views ----------------------------------------------------------------------

    def edge_type_index(self, edge_type: EdgeType) -> int:
        """The position of ``edge_type`` in ``edge_types`` (what ``type_per_edge`` holds)."""
        try:
            return self.edge_types.index(tuple(edge_type))
        except ValueError:
            raise ValueError(f"unknown edge type {tuple(edge_type)}; the edge types are "
                             f"{list(self.edge_types)}") from None

    def edge_type_csc(self, edge_type: EdgeType
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The CSC of one edge type: ``(indptr, indices, eids)``.

        ``indptr`` (int64) runs over the destination type's nodes (its local ids); ``indices``
        are source-type-LOCAL ids (the fused ``indices``' dtype), so they index
        ``features[source type]`` directly; ``eids`` (int64) are the global edge ids (fused CSC
        positions) of those edges. Computed on first use and cached; for a one-type graph it
        is ``(indptr, indices, arange(E))``, the first two the graph's own tensors.
        """
        k = self.edge_type_index(edge_type)
        if k in self._type_csc:
            return self._type_csc[k]
        src, _, dst = self.edge_types[k]
        if not self.is_typed:
            out = (self.indptr, self.indices, torch.arange(self.num_edges))
        else:
            lo, hi = self._range(dst)
            rows = self.indptr[lo:hi + 1]
            first, last = int(rows[0]), int(rows[-1])
            if self.type_per_edge is None:
                ptr, eids = rows - first, torch.arange(first, last)
            else:
                mine = self.type_per_edge[first:last] == k
                count = torch.zeros(last - first + 1, dtype=torch.int64)
                count[1:] = torch.cumsum(mine, 0)
                ptr, eids = count[rows - first], mine.nonzero().reshape(-1) + first
            s_lo = self._range(src)[0]
            out = (ptr, (self.indices[eids] - s_lo).to(self.indices.dtype), eids)
        self._type_csc[k] = out
        return out

    @property
    def features(self) -> dict[str, torch.Tensor]:
        """Per-type feature matrices, rows in type-local id order (featureless types absent):
        with one node type ``{type: x}`` (the same tensor), with ``x`` over several types its
        row slices (views), else ``type_features``."""
        if self.x is None:
            return dict(self.type_features)
        if len(self.node_types) == 1:
            return {self.node_types[0]: self.x}
        off = self.node_type_offset.tolist()
        return {t: self.x[off[i]:off[i + 1]] for i, t in enumerate(self.node_types)}

    @property
    def feature_dims(self) -> dict[str, int]:
        """Feature columns of every node type (0: no features)."""
        feats = self.features
        return {t: int(feats[t].shape[1]) if t in feats else 0 for t in self.node_types}

    @property
    def edge_attrs(self) -> dict[EdgeType, torch.Tensor]:
        """Per-edge-type edge features, rows in that type's edge id order (the order of
        ``edge_type_csc(type)[2]``; types without edge features absent): with one edge type
        ``{type: edge_attr}`` (the same tensor), with one ``edge_attr`` over several types its
        rows gathered per type, else ``type_edge_attr``."""
        if self.edge_attr is None:
            return dict(self.type_edge_attr)
        if len(self.edge_types) == 1:
            return {self.edge_types[0]: self.edge_attr}
        return {et: self.edge_attr[self.edge_type_csc(et)[2]] for et in self.edge_types}

    @property
    def edge_feature_dims(self) -> dict[EdgeType, int]:
        """Edge feature columns of every edge type (0: none)."""
        if self.edge_attr is not None:
            return dict.fromkeys(self.edge_types, int(self.edge_attr.shape[1]))
        return {et: int(self.type_edge_attr[et].shape[1]) if et in self.type_edge_attr else 0
                for et in self.edge_types}

    def labels(self) -> torch.Tensor:
        """``y``, for code that reads labels: a ValueError naming the graph when it has none."""
        if self.y is None:
            raise ValueError(f"{self.name} has no labels (y): this needs a labelled graph")
        return self.y

    def feature_matrix(self) -> torch.Tensor:
        """``x``, for code that reads one feature matrix: a ValueError saying why when there
        is none (no features, or node types of different widths: :meth:`no_x_reason`)."""
        if self.x is None:
            raise ValueError(self.no_x_reason() or f"{self.name} has no node features (x)")
        return self.x

    def no_x_reason(self) -> str | None:
        """Why this graph has no single feature matrix ``x`` although it has features (its
        node types' widths differ or some have none: code for typed graphs reads
        ``features[type]``), or None."""
        if self.x is not None or not self.type_features:
            return None
        dims = ", ".join(f"{t} {d or 'none'}" for t, d in self.feature_dims.items())
        return (f"{self.name} has no single feature matrix x: its node types' feature "
                f"widths differ ({dims}); read graph.features[node type] instead")

    # ---- whole-graph helpers -----------------------------------------------------------------

    def in_degree(self) -> torch.Tensor:
        """Number of in-neighbors (sources) of every vertex."""
        return self.indptr[1:] - self.indptr[:-1]

    def out_degree(self) -> torch.Tensor:
        """Number of destinations every vertex feeds (how often it is a source)."""
        return torch.bincount(self.indices.long(), minlength=self.num_nodes)

    def edge_index(self) -> torch.Tensor:
        """COO ``[2, E]`` with row 0 = source, row 1 = destination (PyG's convention)."""
        dst = torch.repeat_interleave(torch.arange(self.num_nodes), self.in_degree())
        return torch.stack([self.indices.long(), dst])

    def mask(self, split: str) -> torch.Tensor:
        """Boolean mask of the ``train``/``val``/``test`` split."""
        idx = getattr(self, f"{split}_idx")
        m = torch.zeros(self.num_nodes, dtype=torch.bool)
        if idx is not None:
            m[idx] = True
        return m

    def summary(self) -> str:
        """One line: name, sizes and splits."""
        parts = [f"{self.name}: {self.num_nodes:,} nodes", f"{self.num_edges:,} edges"]
        if self.is_typed:
            parts.append(f"{len(self.node_types)} node types, {len(self.edge_types)} edge types")
        if self.x is not None:
            parts.append(f"{self.num_features} features")
        elif self.type_features:
            parts.append("features " + "/".join(f"{t} {d}" for t, d in self.feature_dims.items()
                                                 if d))
        if self.num_classes:
            parts.append(f"{self.num_classes} classes")
        for s in ("train", "val", "test"):
            idx = getattr(self, f"{s}_idx")
            if idx is not None:
                parts.append(f"{s} {idx.numel():,}")
        return ", ".join(parts)

    # ---- builders ----------------------------------------------------------------------------

    @classmethod
    def from_edge_index(
        cls,
        edge_index: torch.Tensor | np.ndarray | EdgeChunks,
        num_nodes: int | None = None,
        *,
        symmetrize: bool = False,
        self_loops: str = "keep",
        dedupe: bool = True,
        edge_weight: torch.Tensor | None = None,
        edge_attr: torch.Tensor | RowChunks | None = None,
        index_dtype: torch.dtype = torch.int64,
        stage: bounded.Stage | None = None,
        **fields: Any,
    ) -> GraphStore:
        """Build a CSC graph from a ``[2, E]`` (source, destination) edge list: the one-type
        case of :meth:`from_typed` (the same CSC builder).

        ``symmetrize`` adds every reverse edge; ``self_loops`` is ``keep``, ``remove`` or
        ``add`` (one per vertex); ``dedupe`` keeps one copy of repeated edges (the first
        weight wins). Ids must lie in ``[0, num_nodes)``. ``stage``: a dataset's
        :class:`gnnscale.data.bounded.Stage` while it is processed; with a memory budget (or
        a large graph) the CSC is then built out of core into it, bit-identical.
        ``edge_index`` may be a :class:`gnnscale.data.bounded.EdgeSource` (edges on disk): the
        out-of-core build then reads it in chunks, never whole; ``edge_attr`` likewise a
        :class:`gnnscale.data.bounded.RowSource` (rows moved with their edges).
        """
        if _is_source(edge_index):
            built = cls._from_source(edge_index, num_nodes, symmetrize, self_loops, dedupe,
                                     edge_weight, edge_attr, index_dtype, stage, fields)
            if built is not None:
                return built
            edge_index = edge_index.whole()  # the in-memory build
        ei = _edge_array(edge_index, "edge_index")
        if self_loops not in SELF_LOOP_MODES:
            raise ValueError(f"self_loops must be one of {SELF_LOOP_MODES}, got {self_loops!r}")
        if num_nodes is None:
            num_nodes = int(ei.max()) + 1 if ei.numel() else 0
        for name in ("x", "y"):  # before allocating anything of num_nodes' size
            rows = None if fields.get(name) is None else fields[name].shape[0]
            if rows is not None and rows != num_nodes:
                raise ValueError(f"{name} has {rows} rows for {num_nodes} nodes")
        if ei.numel():
            lo, hi = int(ei.min()), int(ei.max())
            if lo < 0 or hi >= num_nodes:
                raise ValueError(
                    f"edge_index holds ids in [{lo}, {hi}] but num_nodes = {num_nodes}: "
                    "ids must lie in [0, num_nodes)"
                )
        w = None if edge_weight is None else torch.as_tensor(edge_weight).float().reshape(-1)
        if w is not None and w.numel() != ei.shape[1]:
            raise ValueError("edge_weight must have one entry per edge")
        a = None if edge_attr is None else \
            _whole_rows(_edge_rows(edge_attr, ei.shape[1], "edge_attr"))
        src, dst = ei[0], ei[1]
        if stage is not None:
            raw = ei.shape[1] * (2 if symmetrize else 1) + (num_nodes if self_loops == "add"
                                                             else 0)
            budget = bounded.budget_for(stage, raw)
            if budget is not None:
                indptr, indices, w, a = bounded.staged_csc(
                    stage, src, dst, w, num_nodes, symmetrize, self_loops, dedupe, budget,
                    index_dtype, fields.get("name", "graph"), a)
                return cls(indptr=indptr, indices=indices, edge_weight=w, edge_attr=a, **fields)
        src, dst, w, a = _edited_edges(src, dst, w, a, num_nodes, symmetrize, self_loops)
        if a is None:
            indptr, src, _, w = build_csc(src, dst, None, num_nodes, 1, dedupe, w)
        else:
            indptr, src, _, order = csc_order(src, dst, None, num_nodes, 1, dedupe)
            w, a = None if w is None else w[order], a[order]
        return cls(indptr=indptr, indices=src.to(index_dtype), edge_weight=w, edge_attr=a,
                   **fields)

    @classmethod
    def _from_source(cls, source, num_nodes: int | None, symmetrize: bool, self_loops: str,
                     dedupe: bool, edge_weight, edge_attr, index_dtype: torch.dtype, stage,
                     fields: dict) -> GraphStore | None:
        """:meth:`from_edge_index` of an edge source read in chunks into ``stage``, edge
        features moved with their edges (None when the in-memory build applies: no stage or
        no budget)."""
        if self_loops not in SELF_LOOP_MODES:
            raise ValueError(f"self_loops must be one of {SELF_LOOP_MODES}, got {self_loops!r}")
        e = source.num_edges
        span = source.span()
        if num_nodes is None:
            num_nodes = max(span[1], span[3]) + 1 if span else 0
        raw = e * (2 if symmetrize else 1) + (num_nodes if self_loops == "add" else 0)
        budget = None if stage is None else bounded.budget_for(stage, raw)
        if budget is None:
            return None
        for name in ("x", "y"):
            rows = None if fields.get(name) is None else fields[name].shape[0]
            if rows is not None and rows != num_nodes:
                raise ValueError(f"{name} has {rows} rows for {num_nodes} nodes")
        if span:
            lo, hi = min(span[0], span[2]), max(span[1], span[3])
            if lo < 0 or hi >= num_nodes:
                raise ValueError(f"edge_index holds ids in [{lo}, {hi}] but num_nodes = "
                                 f"{num_nodes}: ids must lie in [0, num_nodes)")
        w = None if edge_weight is None else torch.as_tensor(edge_weight).float().reshape(-1)
        if w is not None and w.numel() != e:
            raise ValueError("edge_weight must have one entry per edge")
        attr = None if edge_attr is None else _edge_rows(edge_attr, e, "edge_attr")
        spec = None if attr is None else _attr_spec(attr)
        rows = bounded.edge_rows(budget, bounded.attr_row_bytes(spec))

        def edges():
            a = 0
            rows_of = _row_chunks(attr, rows) if attr is not None else None
            for s, d in source.chunks(rows):
                yield (s, d, None if w is None else w[a:a + s.size].numpy(), None,
                       None if rows_of is None else _next_rows(rows_of, s.size))
                a += s.size
        indptr, out = bounded.stage_csc(
            stage, edges, num_nodes, symmetrize, self_loops, dedupe, budget, index_dtype,
            w is not None, 1, fields.get("name", "graph"), spec)
        return cls(indptr=indptr, indices=out["indices"], edge_weight=out.get("edge_weight"),
                   edge_attr=out.get("edge_attr"), **fields)

    @classmethod
    def from_typed(
        cls,
        num_nodes: Mapping[str, int],
        edges: Mapping[EdgeType, torch.Tensor | np.ndarray | EdgeChunks],
        *,
        features: Mapping[str, torch.Tensor] | None = None,
        y: Mapping[str, torch.Tensor] | None = None,
        target_types: tuple[str, ...] | None = None,
        train_idx: Mapping[str, torch.Tensor] | None = None,
        val_idx: Mapping[str, torch.Tensor] | None = None,
        test_idx: Mapping[str, torch.Tensor] | None = None,
        edge_weight: Mapping[EdgeType, torch.Tensor] | None = None,
        edge_attr: Mapping[EdgeType, torch.Tensor | RowChunks] | None = None,
        add_reverse: bool = False,
        dedupe: bool = True,
        index_dtype: torch.dtype = torch.int64,
        num_classes: int | None = None,
        stage: bounded.Stage | None = None,
        **fields: Any,
    ) -> GraphStore:
        """Build a typed graph from per-type parts, all in TYPE-LOCAL ids.

        ``num_nodes``: nodes per type (their order is the global id order); ``edges``:
        ``{(src type, relation, dst type): [2, E] (source, destination)}``; ``features``:
        ``{type: [n_type, F]}`` (types without features left out; when every type has
        features of one width and dtype they become one ``x``); ``y``: ``{type: labels}``
        (the target types, unless ``target_types`` says otherwise); splits:
        ``{type: local ids}`` of target types; ``edge_weight``: ``{edge type: [E]}`` (types
        left out weigh 1); ``edge_attr``: ``{edge type: [E, D] or [E]}`` edge features (types
        left out have none; one ``edge_attr`` in CSC order when every type has them in one
        width and dtype, else ``type_edge_attr``). ``add_reverse`` adds
        ``(dst, "rev_" + relation, src)`` for every edge type (after all given types, with the
        same weights and edge features); ``dedupe`` keeps one copy of an edge repeated within
        its type (the first one's weight and features win). An edge list may be a
        :class:`gnnscale.data.bounded.EdgeSource` and edge features a
        :class:`gnnscale.data.bounded.RowSource`; with a ``stage`` (a dataset being
        processed) the fused CSC is then built out of core from the chunks of every type
        (:meth:`from_edge_index`'s rule), edge features moved with their edges,
        bit-identical. ``x`` (in ``fields``): every type's features already as one matrix
        (streamed to disk), instead of ``features``.
        """
        x_whole = fields.pop("x", None)
        node_types = tuple(num_nodes)
        check_node_types(node_types)
        counts = [int(num_nodes[t]) for t in node_types]
        if any(c < 0 for c in counts):
            raise ValueError(f"num_nodes {dict(num_nodes)} holds a negative count")
        off = torch.tensor([0, *np.cumsum(counts).tolist()], dtype=torch.int64)
        count = dict(zip(node_types, counts))
        start = dict(zip(node_types, off.tolist()))
        edge_types = check_edge_types(tuple(tuple(et) for et in edges), node_types)
        parts = [_local_edges(edges[et], et, count) for et in edge_types]
        ws, ats = _typed_edge_values(edge_types, parts, edge_weight, edge_attr)
        if add_reverse:
            edge_types, parts, ws, ats = _with_reverse(edge_types, parts, ws, ats)
        n = int(off[-1])
        streamed = _typed_source_csc(parts, edge_types, ws, ats, start, n, dedupe,
                                     index_dtype, stage, fields.get("name", "graph"))
        if streamed is not None:
            indptr, indices, w, et_id, one_attr, type_attr = streamed
        else:
            indptr, indices, w, et_id, one_attr, type_attr = _typed_csc_in_memory(
                parts, edge_types, ws, ats, start, n, dedupe)
        x, type_features = _typed_x(x_whole, features, node_types, count, n)
        labels, target_types = _typed_labels(y, target_types, node_types, count, start, n)
        splits = {split: _typed_split(given, split, target_types, count, start)
                  for split, given in (("train_idx", train_idx), ("val_idx", val_idx),
                                       ("test_idx", test_idx))}
        if num_classes is None:
            num_classes = int(labels.max()) + 1 if labels is not None and labels.numel() else 0
        return cls(indptr=indptr, indices=indices.to(index_dtype), x=x, y=labels,
                   edge_weight=w, num_classes=num_classes, node_types=node_types,
                   node_type_offset=off, edge_types=edge_types,
                   type_per_edge=None if len(edge_types) == 1 else et_id if streamed else
                   et_id.to(torch.int16),
                   type_features=type_features, target_types=target_types,
                   edge_attr=one_attr, type_edge_attr=type_attr, train_idx=splits["train_idx"],
                   val_idx=splits["val_idx"], test_idx=splits["test_idx"], **fields)


def build_csc(src: torch.Tensor, dst: torch.Tensor, etype: torch.Tensor | None,
              num_nodes: int, num_etypes: int, dedupe: bool, w: torch.Tensor | None
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """The fused CSC of global (source, destination[, edge type]) lists: in-edges of each
    destination sorted by (edge type, source); ``dedupe`` keeps the first of equal edges.
    Returns ``(indptr, sources, edge types or None, weights or None)`` in CSC order."""
    indptr, src, etype, order = csc_order(src, dst, etype, num_nodes, num_etypes, dedupe)
    return indptr, src, etype, None if w is None else w[order]


def csc_order(src: torch.Tensor, dst: torch.Tensor, etype: torch.Tensor | None,
              num_nodes: int, num_etypes: int, dedupe: bool
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """:func:`build_csc` returning, instead of the weights, ``order``: the input position of
    every CSC edge (gather any per-edge array with it)."""
    n = max(num_nodes, 1)
    k = num_etypes if etype is not None else 1
    if n * k * n < KEY_LIMIT:
        key = dst * n + src if k == 1 or etype is None else (dst * k + etype) * n + src
        if dedupe:
            key, order = unique_first(key)
        else:
            key, order = torch.sort(key, stable=True)
        src, rest = key % n, key // n
        dst, etype = (rest, None) if k == 1 else (rest // k, rest % k)
    else:  # the combined key would overflow int64: a stable three-key sort instead
        types = torch.zeros_like(dst) if etype is None else etype
        order = torch.from_numpy(np.lexsort((src.numpy(), types.numpy(), dst.numpy())))
        src, dst, types = src[order], dst[order], types[order]
        if dedupe and src.numel():
            new = torch.ones_like(src, dtype=torch.bool)
            new[1:] = (src[1:] != src[:-1]) | (dst[1:] != dst[:-1]) | (types[1:] != types[:-1])
            src, dst, types, order = src[new], dst[new], types[new], order[new]
        etype = None if etype is None else types
    indptr = torch.zeros(num_nodes + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=num_nodes), 0)
    return indptr, src, etype, order





def _typed_x(x_whole: torch.Tensor | None, features: Mapping[str, torch.Tensor] | None,
             node_types: tuple[str, ...], count: dict[str, int], n: int
             ) -> tuple[torch.Tensor | None, dict[str, torch.Tensor]]:
    """:meth:`GraphStore.from_typed`'s ``x`` and ``type_features``: ``x_whole`` (every type's
    rows as one matrix, checked to hold ``n`` rows) or the per-type ``features``."""
    if x_whole is None:
        return _typed_features(features or {}, node_types, count)
    if x_whole.dim() != 2 or x_whole.shape[0] != n:
        raise ValueError(f"x has shape {tuple(x_whole.shape)}: {n} rows expected, one "
                         "per node of every type")
    return x_whole, {}

def _typed_edge_values(edge_types: tuple, parts: list, edge_weight: Mapping | None,
                       edge_attr: Mapping | None) -> tuple[list, list]:
    """Per edge type (in ``edge_types`` order), :meth:`GraphStore.from_typed`'s weights
    (``[E]`` float, or None: weight 1) and edge features (rows, or None), each checked against
    its type's edge count; a type that ``edges`` lacks is refused."""
    weights = dict(edge_weight or {})
    for et in weights:
        if tuple(et) not in edge_types:
            raise ValueError(f"edge_weight names edge type {tuple(et)}, which edges lacks")
    ws = []
    for et, part in zip(edge_types, parts):
        w = weights.get(et)
        w = None if w is None else torch.as_tensor(w).float().reshape(-1)
        if w is not None and w.numel() != part.shape[1]:
            raise ValueError(f"edge_weight[{et}] has {w.numel()} entries for "
                             f"{part.shape[1]} edges")
        ws.append(w)
    attrs = dict(edge_attr or {})
    for et in attrs:
        if tuple(et) not in edge_types:
            raise ValueError(f"edge_attr names edge type {tuple(et)}, which edges lacks")
    attrs = {tuple(et): a for et, a in attrs.items()}
    ats = [None if et not in attrs else _edge_rows(attrs[et], part.shape[1],
                                                   f"edge_attr[{et}]")
           for et, part in zip(edge_types, parts)]
    return ws, ats


def _with_reverse(edge_types: tuple, parts: list, ws: list, ats: list
                  ) -> tuple[tuple, list, list, list]:
    """``(dst, "rev_" + relation, src)`` added after every given edge type, with the same
    weights and edge features (:meth:`GraphStore.from_typed`'s ``add_reverse``)."""
    rev = tuple((d, REVERSE + r, s) for s, r, d in edge_types)
    clash = [et for et in rev if et in edge_types]
    if clash:
        raise ValueError(f"add_reverse would add edge type {clash[0]}, which edges "
                         "already has")
    flipped = [_Flipped(p) if _is_source(p) else p.flip(0) for p in parts]
    return edge_types + rev, parts + flipped, ws + ws, ats + ats


def _typed_csc_in_memory(parts: list, edge_types: tuple, ws: list, ats: list,
                         start: dict[str, int], n: int, dedupe: bool) -> tuple:
    """:meth:`GraphStore.from_typed`'s fused CSC built in memory: ``(indptr, indices,
    edge_weight, type of each edge, one edge_attr, type_edge_attr)``."""
    parts = [_edge_array(p.whole(), "edges") if _is_source(p) else p for p in parts]
    ats = [_whole_rows(a) for a in ats]
    src = torch.cat([p[0] + start[et[0]] for et, p in zip(edge_types, parts)])
    dst = torch.cat([p[1] + start[et[2]] for et, p in zip(edge_types, parts)])
    et_id = torch.repeat_interleave(torch.arange(len(edge_types)),
                                    torch.tensor([p.shape[1] for p in parts]))
    w = None
    if any(v is not None for v in ws):
        w = torch.cat([torch.ones(p.shape[1]) if v is None else v
                       for p, v in zip(parts, ws)])
    indptr, indices, et_csc, order = csc_order(src, dst, et_id, n, len(edge_types), dedupe)
    w = None if w is None else w[order]
    one_attr, type_attr = _typed_edge_attr(ats, parts, order, et_csc, edge_types)
    return indptr, indices, w, et_csc, one_attr, type_attr

def _edited_edges(src: torch.Tensor, dst: torch.Tensor, w: torch.Tensor | None,
                  a: torch.Tensor | None, num_nodes: int, symmetrize: bool, self_loops: str
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None,
                             torch.Tensor | None]:
    """The edges (with their weights ``w`` and features ``a``) of
    :meth:`GraphStore.from_edge_index`'s in-memory build: every reverse edge added
    (``symmetrize``), then self loops kept, removed or one added per vertex (``self_loops``)."""
    if symmetrize:
        src, dst = torch.cat([src, dst]), torch.cat([dst, src])
        w = None if w is None else torch.cat([w, w])
        a = None if a is None else torch.cat([a, a])
    if self_loops in ("remove", "add"):
        keep = src != dst
        src, dst = src[keep], dst[keep]
        w = None if w is None else w[keep]
        a = None if a is None else a[keep]
    if self_loops == "add":
        loop = torch.arange(num_nodes)
        src, dst = torch.cat([src, loop]), torch.cat([dst, loop])
        w = None if w is None else torch.cat([w, torch.ones(num_nodes)])
        a = None if a is None else torch.cat([a, a.new_zeros(num_nodes, a.shape[1])])
    return src, dst, w, a

def _is_source(edges: object) -> TypeIs[EdgeChunks]:
    """Whether ``edges`` is a :class:`gnnscale.data.bounded.EdgeSource` (read in chunks)."""
    return hasattr(edges, "span") and hasattr(edges, "chunks")


def _is_rows(attr: object) -> TypeIs[RowChunks]:
    """Whether ``attr`` is a :class:`gnnscale.data.bounded.RowSource` (rows read in chunks)."""
    return not torch.is_tensor(attr) and hasattr(attr, "chunks") and hasattr(attr, "whole")


def _whole_rows(attr):
    """``attr`` in memory (a row source read whole; anything else as it is)."""
    return attr.whole() if _is_rows(attr) else attr


def _attr_spec(attr) -> tuple[int, np.dtype]:
    """``(width, numpy dtype)`` of edge feature rows (a tensor or a row source)."""
    if _is_rows(attr):
        return int(attr.shape[1]), attr.dtype
    return int(attr.shape[1]), torch.empty(0, dtype=attr.dtype).numpy().dtype


def _row_chunks(attr, rows: int):
    """The ``[k, D]`` chunks of edge feature rows, ``rows`` at a time, in order."""
    if _is_rows(attr):
        yield from attr.chunks(rows)
        return
    a = attr.numpy()
    for b in range(0, a.shape[0], rows):
        yield a[b:b + rows]


def _next_rows(chunks, count: int) -> np.ndarray:
    """The next chunk of feature rows, which must hold ``count`` rows (one per edge)."""
    block = next(chunks, None)
    if block is None or len(block) != count:
        raise ValueError(f"edge features end before their edges ({count} rows expected)")
    return block


def _edge_rows(attr: torch.Tensor | np.ndarray | RowChunks, edges: int, what: str
               ) -> torch.Tensor | RowChunks:
    """Edge features ``[E, D]`` (``[E]``: one column), one row per edge of their list (a
    :class:`gnnscale.data.bounded.RowSource` checked by its shape and kept as it is)."""
    if _is_rows(attr):
        if attr.shape[0] != edges:
            raise ValueError(f"{what} has shape {tuple(attr.shape)}: {edges} rows expected, "
                             "one per edge of that type")
        return attr
    a = torch.as_tensor(np.asarray(attr) if not torch.is_tensor(attr) else attr)
    a = a.reshape(-1, 1) if a.dim() == 1 else a
    if a.dim() != 2 or a.shape[0] != edges:
        raise ValueError(f"{what} has shape {tuple(a.shape)}: {edges} rows expected, one per "
                         "edge of that type")
    return a


def _typed_edge_attr(ats: list[torch.Tensor | None], parts: list[torch.Tensor],
                     order: torch.Tensor, et_id: torch.Tensor | None,
                     edge_types: tuple[EdgeType, ...]
                     ) -> tuple[torch.Tensor | None, dict[EdgeType, torch.Tensor]]:
    """Edge features given per type (input order), moved with the edges into CSC order:
    one matrix when every type has them in one width and dtype, else per type."""
    given = [a for a in ats if a is not None]
    if not given:
        return None, {}
    if len(given) == len(ats) and len({(a.shape[1], a.dtype) for a in given}) == 1:
        return torch.cat(given)[order], {}
    starts = np.cumsum([0] + [p.shape[1] for p in parts]).tolist()
    out = {}
    for k, (et, a) in enumerate(zip(edge_types, ats)):
        if a is None:
            continue
        mine = order if et_id is None else order[et_id == k]  # CSC order within the type
        out[et] = a[mine - starts[k]]
    return None, out


def _edge_array(edges: torch.Tensor | np.ndarray, what: str) -> torch.Tensor:
    ei = torch.as_tensor(np.asarray(edges) if not torch.is_tensor(edges) else edges)
    if ei.dim() != 2 or ei.shape[0] != 2:
        raise ValueError(f"{what} must have shape [2, E], got {tuple(ei.shape)}")
    if ei.is_floating_point() or ei.dtype == torch.bool:
        raise TypeError(f"{what} must hold integer ids, got {ei.dtype}")
    return ei.long()


class _Flipped:
    """An edge source read with its two rows swapped (a reverse edge type)."""

    def __init__(self, source) -> None:
        self.source, self.shape, self.num_edges = source, source.shape, source.num_edges

    def chunks(self, rows: int):
        for s, d in self.source.chunks(rows):
            yield d, s

    def span(self):
        span = self.source.span()
        return None if span is None else (span[2], span[3], span[0], span[1])

    def whole(self) -> torch.Tensor:
        return self.source.whole().flip(0)


def _typed_source_csc(parts: list, edge_types: tuple[EdgeType, ...],
                      ws: list[torch.Tensor | None], ats: list, start: dict[str, int], n: int,
                      dedupe: bool, index_dtype: torch.dtype, stage, what: str):
    """The fused CSC of typed parts built out of core into ``stage`` from their chunks, edge
    features moved with their edges (``(indptr, indices, weights, edge types, edge_attr,
    type_edge_attr)`` as :func:`_typed_edge_attr` arranges them), or None for the in-memory
    build: no stage, no edge source among the parts, or no budget."""
    if stage is None or not any(_is_source(p) for p in parts):
        return None
    budget = bounded.budget_for(stage, sum(int(p.shape[1]) for p in parts))
    if budget is None:
        return None
    specs = {k: _attr_spec(a) for k, a in enumerate(ats) if a is not None}
    one = len(specs) == len(ats) and len(set(specs.values())) == 1
    spec = None if not specs else next(iter(specs.values())) if one else specs
    rows = bounded.edge_rows(budget, bounded.attr_row_bytes(spec))
    weighted = any(v is not None for v in ws)

    def edges():
        for k, (et, p, v, at) in enumerate(zip(edge_types, parts, ws, ats)):
            a = 0
            chunks = p.chunks(rows) if _is_source(p) else (
                (p[0, b:b + rows].numpy(), p[1, b:b + rows].numpy())
                for b in range(0, p.shape[1], rows))
            rows_of = None if at is None else _row_chunks(at, rows)
            for s, d in chunks:
                w = None if not weighted else np.ones(s.size, np.float32) if v is None else \
                    v[a:a + s.size].numpy()
                a += s.size
                yield (s + start[et[0]], d + start[et[2]], w, np.full(s.size, k, np.int64),
                       None if rows_of is None else _next_rows(rows_of, s.size))
    indptr, out = bounded.stage_csc(stage, edges, n, False, "keep", dedupe, budget,
                                    index_dtype, weighted, len(edge_types), what, spec)
    type_attr = {edge_types[k]: out[f"edge_attr__{k}"] for k in specs} if specs and not one \
        else {}
    return (indptr, out["indices"], out.get("edge_weight"), out.get("type_per_edge"),
            out.get("edge_attr"), type_attr)


def _local_edges(edges, et: EdgeType, count: dict[str, int]):
    """``edges[et]`` checked: ``[2, E]`` integer type-local ids in range of both ends (an
    edge source is checked from its span and kept as it is)."""
    if _is_source(edges):
        span = edges.span()
        for row, end in ((0, et[0]), (1, et[2])):
            if span is not None:
                lo, hi = span[2 * row], span[2 * row + 1]
                if lo < 0 or hi >= count[end]:
                    side = "source" if row == 0 else "destination"
                    raise ValueError(f"edges[{et}] holds {side} ids in [{lo}, {hi}] but there "
                                     f"are {count[end]} {end!r} nodes: ids are local to their "
                                     "node type")
        return edges
    ei = _edge_array(edges, f"edges[{et}]")
    for row, end in ((0, et[0]), (1, et[2])):
        if ei.shape[1]:
            m, x = torch.aminmax(ei[row])
            if int(m) < 0 or int(x) >= count[end]:
                side = "source" if row == 0 else "destination"
                raise ValueError(f"edges[{et}] holds {side} ids in [{int(m)}, {int(x)}] but "
                                 f"there are {count[end]} {end!r} nodes: ids are local to "
                                 "their node type")
    return ei


def _typed_features(features: Mapping[str, torch.Tensor], node_types: tuple[str, ...],
                    count: dict[str, int]
                    ) -> tuple[torch.Tensor | None, dict[str, torch.Tensor]]:
    """One ``x`` when every type has features of one width and dtype, else per type."""
    for t, f in features.items():
        if t not in count:
            raise ValueError(f"features names node type {t!r}, which is not one of the node "
                             f"types ({', '.join(node_types)})")
        if f.dim() != 2 or f.shape[0] != count[t]:
            raise ValueError(f"features[{t!r}] has shape {tuple(f.shape)}: {count[t]} rows "
                             f"expected, one per {t!r} node")
    feats = [features[t] for t in node_types if t in features]
    if feats and len(feats) == len(node_types) and \
            len({(f.shape[1], f.dtype) for f in feats}) == 1:
        return (feats[0] if len(feats) == 1 else torch.cat(feats)), {}
    return None, {t: features[t] for t in node_types if t in features}


def _typed_labels(y: Mapping[str, torch.Tensor] | None, target_types: tuple[str, ...] | None,
                  node_types: tuple[str, ...], count: dict[str, int], start: dict[str, int],
                  n: int) -> tuple[torch.Tensor | None, tuple[str, ...]]:
    """Global labels (-1 where a type has none) and the target types."""
    y = dict(y or {})
    for t, lab in y.items():
        if t not in count:
            raise ValueError(f"y names node type {t!r}, which is not one of the node types "
                             f"({', '.join(node_types)})")
        if lab.dim() != 1 or lab.numel() != count[t]:
            raise ValueError(f"y[{t!r}] has shape {tuple(lab.shape)}: {count[t]} labels "
                             f"expected, one per {t!r} node")
    if target_types is None:
        target_types = tuple(t for t in node_types if t in y)
    target_types = tuple(target_types)
    for t in target_types:
        if t not in count:
            raise ValueError(f"target type {t!r} is not one of the node types "
                             f"({', '.join(node_types)})")
        if t not in y:
            raise ValueError(f"target type {t!r} has no labels: y gives labels for "
                             f"{', '.join(y) or 'no type'}")
    if not y:
        return None, target_types
    labels = torch.full((n,), -1, dtype=torch.int64)
    for t, lab in y.items():
        labels[start[t]:start[t] + count[t]] = lab.long()
    return labels, target_types


def _typed_split(given: Mapping[str, torch.Tensor] | None, split: str,
                 target_types: tuple[str, ...], count: dict[str, int],
                 start: dict[str, int]) -> torch.Tensor | None:
    """A split given as ``{target type: local ids}``, as global ids."""
    if given is None:
        return None
    if not isinstance(given, Mapping):
        raise TypeError(f"{split} of a typed graph is {{node type: local ids}}, got "
                        f"{type(given).__name__}")
    out = []
    for t, ids in given.items():
        if t not in target_types:
            raise ValueError(f"{split} names node type {t!r}, which is not a target type "
                             f"({', '.join(target_types) or 'none'})")
        ids = torch.as_tensor(ids)
        check_ids(ids, count[t], f"{split}[{t!r}]")
        out.append(ids.long() + start[t])
    return torch.cat(out) if out else torch.empty(0, dtype=torch.int64)


def _check_span(ids: torch.Tensor, lo: int, hi: int, what: str) -> None:
    if ids.numel():
        a, b = torch.aminmax(ids)
        if int(a) < lo or int(b) >= hi:
            raise ValueError(f"ids in [{int(a)}, {int(b)}] are not all {what} ([{lo}, {hi}))")


def unique_first(key: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sorted unique keys and, for each, the position of its first occurrence."""
    skey, order = torch.sort(key, stable=True)
    if skey.numel() == 0:
        return skey, order
    new = torch.ones_like(skey, dtype=torch.bool)
    new[1:] = skey[1:] != skey[:-1]
    return skey[new], order[new]
