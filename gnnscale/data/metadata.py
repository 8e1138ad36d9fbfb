"""A processed dataset's sizes from its ``meta.json`` alone (torch-free): what the launcher's
checks read instead of loading the graph.

A typed graph's ``meta.json`` has a ``types`` section (:func:`types_problem` says what it
holds): node types with their counts, edge types with theirs, the target types; its typed
arrays (:data:`TYPED_ARRAYS`, per-type features ``x__<type>``), edge features
(:data:`EDGE_ATTR`, or ``edge_attr__<k>`` per edge type) and that section enter the checksum
only when present, so a graph without them hashes as it always did. So do the side
arrays of a graph read from the user's tables (:data:`SIDE_PREFIXES`: its id map and class
names), whose lengths :func:`side_problem` checks against the node counts.

The launcher trusts these sizes only when ``meta.json`` is consistent: its sizes agree with
its arrays' shapes (:func:`size_problem`), those shapes with the ``.npy`` files' headers,
and its checksum with its fields and recorded digests (:func:`combine`); anything else reads
as "not processed", and the loader then names the file and field.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the processed format this reader understands (``gnnscale.data.processed.FORMAT_VERSION``);
#: 3: the checksum covers the name and the sizes too
FORMAT = 3
#: the graph store's arrays, in checksum order; then a link split's (``graph.LINK_ARRAYS``)
ARRAYS = ("indptr", "indices", "x", "y", "train_idx", "val_idx", "test_idx", "edge_weight")
LINK_ARRAYS = ("train_pos", "val_pos", "val_neg", "test_pos", "test_neg")
#: a typed graph's arrays: ``node_type_offset`` (several node types), ``type_per_edge``
#: (several edge types); per-type features are ``x__<type>`` (:data:`FEATURES_PREFIX`)
TYPED_ARRAYS = ("node_type_offset", "type_per_edge")
FEATURES_PREFIX = "x__"
#: edge features: one ``[E, D]`` matrix in CSC order (any graph), or per edge type
#: ``edge_attr__<k>`` (``k``: the edge type's position in ``types.edge_types``), rows in that
#: type's edge id order; in the checksum only when present
EDGE_ATTR = "edge_attr"
EDGE_ATTR_PREFIX = "edge_attr__"
#: arrays kept beside a graph, per node type: the user's ids, one per node of the type
#: (``ids__<type>``: int64; string ids as ``idends__<type>``, int64 end offsets, with
#: ``idtext__<type>``, their UTF-8 bytes) and class names, one per class (``classends__<type>``
#: with ``classtext__<type>``): :mod:`gnnscale.data.idmap`. An older gnnscale stored strings
#: as unicode ``ids__<type>`` and ``classes__<type>``; those still read. Verified and in the
#: checksum like the rest when present.
SIDE_PREFIXES = ("ids__", "classes__", "idends__", "idtext__", "classends__", "classtext__")
#: the side arrays of a string array: end offsets -> UTF-8 bytes
_TEXT_PAIRS = {"idends__": "idtext__", "classends__": "classtext__"}
#: the type facts of a homogeneous graph (``meta.json`` has no ``types`` section then)
NODE = "node"
EDGE = (NODE, "to", NODE)
#: The parts of a graph a task may need (``TaskConfig.needs``): how a refusal names one the
#: graph lacks, and how it lists what the task needs.
PARTS = {"features": ("features (x)", "features (x)"), "labels": ("labels (y)", "labels (y)"),
         "train_split": ("a training split (train_idx or train_mask)", "a training split")}


def fields_string(name: str, num_nodes: int, num_edges: int, num_features: int,
                  types: dict | None = None) -> str:
    """The scalar fields of meta.json that the checksum covers (beside the arrays' digests
    and the number of classes), as one canonical string; ``types``: a typed graph's section."""
    fields: list = [str(name), int(num_nodes), int(num_edges), int(num_features)]
    if types is not None:
        fields.append(types)
    return json.dumps(fields, sort_keys=True)


def meta_fields(meta: dict) -> str:
    """:func:`fields_string` of a meta.json's content."""
    return fields_string(meta["name"], meta["num_nodes"], meta["num_edges"],
                         meta["num_features"], meta.get("types"))


def combine(digests: dict[str, str], num_classes: int, fields: str) -> str:
    """The checksum of a processed graph: its arrays' digests, classes and fields."""
    h = hashlib.blake2b(digest_size=16)
    for name in ARRAYS:
        h.update(f"{name}:{digests.get(name, 'none')};".encode())
    for name in LINK_ARRAYS:  # only when present: a graph without them hashes as it always did
        if name in digests:
            h.update(f"{name}:{digests[name]};".encode())
    for name in sorted(set(digests) - set(ARRAYS) - set(LINK_ARRAYS)):  # typed, when present
        h.update(f"{name}:{digests[name]};".encode())
    h.update(str(num_classes).encode())
    h.update(f";fields:{fields}".encode())
    return h.hexdigest()


def size_problem(meta: dict) -> str | None:
    """What in meta.json's sizes disagrees with its arrays' shapes (one phrase naming the
    field), or None."""
    arrays = meta["arrays"]

    def shape(name: str) -> list | None:
        info = arrays.get(name)
        return None if info is None else list(info["shape"])

    for field in ("num_nodes", "num_edges", "num_features", "num_classes"):
        v = meta.get(field)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            return f"field {field} is {v!r}, not an integer >= 0"
    indptr, indices, x = shape("indptr"), shape("indices"), shape("x")
    if indptr is None or indices is None:
        return "field arrays lacks indptr or indices"
    expected = {"num_nodes": indptr[0] - 1, "num_edges": indices[0],
                "num_features": 0 if x is None else (x[1] if len(x) == 2 else -1)}
    for field, want in expected.items():
        if meta[field] != want:
            return (f"field {field} is {meta[field]} but the arrays' shapes give {want}: "
                    "meta.json was edited")
    for name, rows in (("x", expected["num_nodes"]), ("y", expected["num_nodes"]),
                       ("edge_weight", expected["num_edges"]),
                       (EDGE_ATTR, expected["num_edges"])):
        s = shape(name)
        if s is not None and (not s or s[0] != rows or (name == EDGE_ATTR and len(s) != 2)):
            return f"field arrays.{name}.shape is {s}: {rows} rows expected"
    return types_problem(meta) or side_problem(meta)


def is_side(name: str) -> bool:
    """Whether array ``name`` is kept beside the graph (:data:`SIDE_PREFIXES`)."""
    return name.startswith(SIDE_PREFIXES)


def side_problem(meta: dict) -> str | None:
    """What is wrong with the side arrays meta.json lists (one phrase naming the field), or
    None: each names a node type; ids are 1-D int64 (or an older unicode) with one entry per
    node of their type (a map of another graph is refused), or int64 ends of as many strings
    with their uint8 text beside them; class names 1 to ``num_classes`` strings the same
    way."""
    types = meta.get("types") or {}
    counts = dict(zip(types.get("node_types", [NODE]), types.get("num_nodes",
                                                                   [meta["num_nodes"]])))
    arrays = meta["arrays"]
    for name, info in arrays.items():
        if not is_side(name):
            continue
        prefix = next(p for p in SIDE_PREFIXES if name.startswith(p))
        node_type, shape, dtype = name[len(prefix):], list(info["shape"]), str(info["dtype"])
        if node_type not in counts:
            return f"field arrays holds {name}, but the graph has no node type {node_type!r}"
        ids = prefix in ("ids__", "idends__")
        rows = f"[{counts[node_type]}]" if ids else f"[1..num_classes = {meta['num_classes']}]"
        if prefix in ("idtext__", "classtext__"):
            if len(shape) != 1 or dtype != "|u1":
                return f"field arrays.{name} is {dtype} {shape}: uint8 [bytes] expected"
            ends = next(e for e, t in _TEXT_PAIRS.items() if t == prefix)
            if ends + node_type not in arrays:
                return f"field arrays holds {name} without {ends}{node_type}"
            continue
        if prefix in _TEXT_PAIRS:
            if _TEXT_PAIRS[prefix] + node_type not in arrays:
                return f"field arrays holds {name} without {_TEXT_PAIRS[prefix]}{node_type}"
            plain = "ids__" if ids else "classes__"
            if plain + node_type in arrays:
                return f"field arrays holds both {name} and {plain}{node_type}"
            allowed = dtype == "<i8"
            kind = "int64"
        else:
            allowed = (ids and dtype == "<i8") or dtype.startswith("<U")
            kind = "int64 or unicode" if ids else "unicode"
        fits = shape == [counts[node_type]] if ids else \
            len(shape) == 1 and 0 < shape[0] <= meta["num_classes"]
        if not (allowed and fits):
            what = f" (one id per {node_type!r} node)" if ids else ""
            return f"field arrays.{name} is {dtype} {shape}: {kind} {rows} expected{what}"
    return None


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(p, str) and p for p in v)


def _count_list(v: Any, length: int) -> bool:
    return isinstance(v, list) and len(v) == length and \
        all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in v)


def types_problem(meta: dict) -> str | None:
    """What in meta.json's ``types`` section, or in the arrays that go with it, is wrong (one
    phrase naming the field), or None. The section holds ``node_types`` and ``num_nodes`` (per
    type, summing to the graph's), ``edge_types`` (``[source, relation, destination]``) and
    ``num_edges``, and ``target_types``; ``node_type_offset`` is stored with several node
    types, ``type_per_edge`` with several edge types, ``x__<type>`` per featured type."""
    arrays, types = meta["arrays"], meta.get("types")
    typed = {n for n in set(arrays) - set(ARRAYS) - set(LINK_ARRAYS) - {EDGE_ATTR}
             if not is_side(n)}
    if types is None:
        return f"field arrays holds {sorted(typed)} without a types section" if typed else None
    if not isinstance(types, dict):
        return "field types is not an object"
    nt, et = types.get("node_types"), types.get("edge_types")
    if not _str_list(nt) or not nt or len(set(nt)) != len(nt):
        return "field types.node_types is not a list of distinct node type names"
    if not _count_list(types.get("num_nodes"), len(nt)) or \
            sum(types["num_nodes"]) != meta["num_nodes"]:
        return f"field types.num_nodes is not {len(nt)} counts summing to {meta['num_nodes']}"
    if not isinstance(et, list) or not et or \
            not all(_str_list(e) and len(e) == 3 and e[0] in nt and e[2] in nt for e in et):
        return "field types.edge_types is not a list of [source, relation, destination] " \
               "triples of its node types"
    if not _count_list(types.get("num_edges"), len(et)) or \
            sum(types["num_edges"]) != meta["num_edges"]:
        return f"field types.num_edges is not {len(et)} counts summing to {meta['num_edges']}"
    tt = types.get("target_types")
    if not isinstance(tt, list) or not all(t in nt for t in tt):
        return "field types.target_types is not a list of its node types"
    want = {f"{FEATURES_PREFIX}{t}": [n] for t, n in zip(nt, types["num_nodes"])}
    if len(nt) > 1:
        want["node_type_offset"] = [len(nt) + 1]
    if len(et) > 1:
        want["type_per_edge"] = [meta["num_edges"]]
    want.update({f"{EDGE_ATTR_PREFIX}{k}": [n] for k, n in enumerate(types["num_edges"])})
    if EDGE_ATTR in arrays and any(n.startswith(EDGE_ATTR_PREFIX) for n in arrays):
        return f"field arrays holds {EDGE_ATTR} and per-type {EDGE_ATTR_PREFIX}<k>: one or " \
               "the other"
    for name in typed | set(TYPED_ARRAYS) & set(want):
        if name not in want:
            return f"field arrays holds {name}, which this graph's types do not explain"
        s = list(arrays[name]["shape"]) if name in arrays else None
        if s is None or s[:1] != want[name] or \
                len(s) != (2 if name.startswith((FEATURES_PREFIX, EDGE_ATTR_PREFIX)) else 1):
            return f"field arrays.{name}.shape is {s}: {want[name][0]} rows expected"
    return None


def _npy_shape(file: Path) -> tuple:
    """The shape in a ``.npy`` file's header (nothing else is read)."""
    import numpy as np

    with open(file, "rb") as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            return np.lib.format.read_array_header_1_0(f)[0]
        return np.lib.format.read_array_header_2_0(f)[0]


def consistent(folder: Path, meta: dict) -> bool:
    """Whether ``meta`` (of ``folder``'s meta.json) agrees with itself and the files' headers:
    sizes against shapes, shapes against the ``.npy`` headers, the checksum against the
    fields and recorded digests (no array is hashed)."""
    if size_problem(meta) is not None:
        return False
    for name in ("indptr", "indices", "x"):
        if name in meta["arrays"] and \
                list(_npy_shape(folder / f"{name}.npy")) != meta["arrays"][name]["shape"]:
            return False
    digests = {n: info["sha256"] for n, info in meta["arrays"].items()}
    return combine(digests, meta["num_classes"], meta_fields(meta)) == meta["checksum"]


@dataclass(frozen=True)
class DatasetMeta:
    """Sizes and splits of a processed graph, and its types: per-type node and edge counts,
    feature widths (0: none) and the target types (filled in for a homogeneous graph: one
    type ``node``, one edge type ``(node, to, node)``)."""

    name: str
    num_nodes: int
    num_edges: int
    num_features: int
    num_classes: int
    num_train: int
    has_features: bool
    has_labels: bool
    has_train: bool
    has_edge_weight: bool = False
    checksum: str | None = None
    node_types: tuple[str, ...] = (NODE,)
    edge_types: tuple[tuple[str, str, str], ...] = (EDGE,)
    num_nodes_per_type: tuple[int, ...] = ()
    num_edges_per_type: tuple[int, ...] = ()
    feature_dims: tuple[int, ...] = ()
    target_types: tuple[str, ...] | None = None
    #: edge feature columns of every edge type (0: none; empty: no edge features at all)
    edge_feature_dims: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        one = len(self.node_types) == 1
        if not self.num_nodes_per_type and one:
            object.__setattr__(self, "num_nodes_per_type", (self.num_nodes,))
        if not self.num_edges_per_type and len(self.edge_types) == 1:
            object.__setattr__(self, "num_edges_per_type", (self.num_edges,))
        if not self.feature_dims and one:
            object.__setattr__(self, "feature_dims", (self.num_features,))
        if self.target_types is None:
            object.__setattr__(self, "target_types", self.node_types if one else ())

    @property
    def is_typed(self) -> bool:
        """More than one node type or more than one edge type."""
        return len(self.node_types) > 1 or len(self.edge_types) > 1

    @classmethod
    def read(cls, folder: str | Path | None) -> DatasetMeta | None:
        """The metadata of the processed graph in ``folder``; None when there is none, or
        anything about it is unexpected (the loader then says what)."""
        if folder is None:
            return None
        try:
            meta = json.loads((Path(folder) / "meta.json").read_text())
            if meta.get("format") != FORMAT or not consistent(Path(folder), meta):
                return None
            arrays: dict[str, Any] = meta["arrays"]
            train = arrays.get("train_idx")
            types = meta.get("types") or {}
            node_types = tuple(types.get("node_types", (NODE,)))
            x = arrays.get("x")
            dims = tuple(int(x["shape"][1]) if x else int(arrays[
                f"{FEATURES_PREFIX}{t}"]["shape"][1]) if f"{FEATURES_PREFIX}{t}" in arrays
                else 0 for t in node_types)
            edge_types = tuple(tuple(e) for e in types.get("edge_types", (EDGE,)))
            edge_dims = _edge_dims(arrays, len(edge_types))
            return cls(name=str(meta["name"]), num_nodes=int(meta["num_nodes"]),
                       num_edges=int(meta["num_edges"]),
                       num_features=int(meta["num_features"]),
                       num_classes=int(meta["num_classes"]),
                       num_train=int(train["shape"][0]) if train else 0,
                       has_features="x" in arrays, has_labels="y" in arrays,
                       has_train=train is not None,
                       has_edge_weight="edge_weight" in arrays,
                       checksum=str(meta["checksum"]), node_types=node_types,
                       edge_types=edge_types,
                       num_nodes_per_type=tuple(types.get("num_nodes", ())),
                       num_edges_per_type=tuple(types.get("num_edges", ())),
                       feature_dims=dims,
                       target_types=None if not types else tuple(types["target_types"]),
                       edge_feature_dims=edge_dims)
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None

    def lacks(self, needs: tuple[str, ...] = tuple(PARTS)) -> str | None:
        """The parts of :data:`PARTS` named in ``needs`` that this graph lacks, named (None:
        nothing; by default what node classification needs); a typed graph whose features
        differ in width per type is told to read them per type."""
        missing = lacks(self.has_features, self.has_labels, self.has_train, needs)
        if missing and not self.has_features and any(self.feature_dims):
            dims = ", ".join(f"{t} {d or 'none'}" for t, d in zip(self.node_types,
                                                                  self.feature_dims))
            missing = missing.replace("features (x)", "one feature matrix x (its node types' "
                                      f"feature widths differ: {dims}; code for typed graphs "
                                      "reads graph.features[node type])")
        return missing

    @classmethod
    def of(cls, graph: Any) -> DatasetMeta:
        """The metadata of a loaded graph (a :class:`~gnnscale.data.graph.GraphStore`)."""
        train = graph.train_idx
        counts = graph.node_type_offset.diff().tolist()
        return cls(name=graph.name, num_nodes=int(graph.num_nodes),
                   num_edges=int(graph.num_edges), num_features=int(graph.num_features),
                   num_classes=int(graph.num_classes),
                   num_train=0 if train is None else int(train.numel()),
                   has_features=graph.x is not None, has_labels=graph.y is not None,
                   has_train=train is not None, has_edge_weight=graph.edge_weight is not None,
                   checksum=graph.meta.get("checksum"), node_types=tuple(graph.node_types),
                   edge_types=tuple(graph.edge_types), num_nodes_per_type=tuple(counts),
                   num_edges_per_type=tuple(graph.num_edges_per_type()),
                   feature_dims=tuple(graph.feature_dims.values()),
                   target_types=tuple(graph.target_types),
                   edge_feature_dims=() if graph.edge_attr is None and not graph.type_edge_attr
                   else tuple(graph.edge_feature_dims.values()))


def _edge_dims(arrays: dict, num_edge_types: int) -> tuple[int, ...]:
    """Edge feature widths per edge type from meta.json's arrays (empty: none at all)."""
    if EDGE_ATTR in arrays:
        return (int(arrays[EDGE_ATTR]["shape"][1]),) * num_edge_types
    per = [arrays.get(f"{EDGE_ATTR_PREFIX}{k}") for k in range(num_edge_types)]
    if all(a is None for a in per):
        return ()
    return tuple(0 if a is None else int(a["shape"][1]) for a in per)


def lacks(has_features: bool, has_labels: bool, has_train: bool,
          needs: tuple[str, ...] = tuple(PARTS)) -> str | None:
    """``"labels (y)"``, ``"features (x) and labels (y)"``...: the parts of ``needs`` (keys of
    :data:`PARTS`; by default all, what node classification needs) a graph lacks, or None."""
    has = {"features": has_features, "labels": has_labels, "train_split": has_train}
    missing = [PARTS[part][0] for part in needs if not has[part]]
    if not missing:
        return None
    return _listed(missing)


def lacks_message(name: str, missing: str, task: str = "node classification",
                  needs: tuple[str, ...] = tuple(PARTS)) -> str:
    """The refusal of a graph ``task`` cannot train on: what it lacks, what ``task`` needs."""
    return f"dataset {name} lacks {missing}: {task} needs {_listed([PARTS[p][1] for p in needs])}"


def _listed(words: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
