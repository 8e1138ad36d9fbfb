"""A user's typed graph for ``dataset=custom``: the typed ``.npz`` layout, or a PyG ``HeteroData``
saved with ``torch.save`` (loaded with ``weights_only=True``, nothing unpickled but tensors
and PyG's storage classes).

The typed ``.npz`` layout (names join their parts with ``__``, so type and relation names
may not contain ``__``; ids are LOCAL to their node type)::

    num_nodes__<type>                   nodes of a type (needed for a featureless, unlabelled
                                        type; else it must agree with x/y)
    x__<type>                           [n, F] features of a type (types may differ in F)
    y__<type>                           [n] labels (-1 = unlabelled): the target types
    {train,val,test}_idx__<type>        local ids of a target type, or
    {train,val,test}_mask__<type>       boolean [n] masks; without any, a seeded random
                                        split of each target type's labelled nodes
    edge_index__<src>__<rel>__<dst>     [2, E] (source, destination) local ids: an edge type
    edge_attr__<src>__<rel>__<dst>      [E, D] (or [E]) edge features, optional
    edge_weight__<src>__<rel>__<dst>    [E] edge weights, optional
    num_classes                         optional (else the largest label + 1)
    node_types                          optional: the node type names in global id order
                                        (else sorted)

A ``HeteroData`` gives the same parts from its stores: ``data[type].x / y / num_nodes /
{train,val,test}_mask or _idx`` and ``data[src, rel, dst].edge_index / edge_attr /
edge_weight``. With ``symmetrize`` (the default) a ``rev_<rel>`` edge type is added for every
edge type. Bad input is one line naming the array: an edge type naming an unknown node type,
ids out of range for their type, features of the wrong row count for their type, a target
type without labels, edge features whose row count differs from the edge count.

While a dataset is processed (:mod:`gnnscale.data.bounded`) the ``.npz`` layout's edge lists
stay on disk, read in chunks by the out-of-core CSC build, and its features are streamed in
row chunks into the processed copy; a ``HeteroData`` file is loaded whole (refused in one
line when it is larger than ``dataset.memory_budget``).
"""

from __future__ import annotations

import math
import re
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gnnscale.data.bounded import EdgeSource, RowSource, Stage, member_chunks
from gnnscale.data.convert import (
    memory_budget,
    ratio_split,
    read_member,
    scan_npz,
    size_text,
)
from gnnscale.data.graph import EdgeType, GraphStore
from gnnscale.errors import ConfigError

if TYPE_CHECKING:
    from torch_geometric.data import HeteroData

SEP = "__"
SPLITS = ("train", "val", "test")
NODE_KEYS = ("num_nodes", "x", "y", *(f"{s}_{k}" for s in SPLITS for k in ("idx", "mask")))
EDGE_KEYS = ("edge_index", "edge_attr", "edge_weight")
_NODE = re.compile(rf"({'|'.join(NODE_KEYS)}){SEP}(.+)")
_EDGE = re.compile(rf"({'|'.join(EDGE_KEYS)}){SEP}(.+)")


def is_typed_npz(names: list[str]) -> bool:
    """Whether the member names of an ``.npz`` follow the typed layout."""
    return any(SEP in n for n in names)


def _tensor(a, what: str, path: Path) -> torch.Tensor:
    """``a`` (array or tensor) as a tensor of plain numbers."""
    if torch.is_tensor(a):
        t = a.detach().cpu()
    else:
        arr = np.asarray(a)
        if arr.dtype.kind not in "biuf":
            raise ConfigError(f"{path}: {what} holds {arr.dtype} values: save plain numeric "
                              "arrays")
        t = torch.from_numpy(arr)
    if t.is_complex():
        raise ConfigError(f"{path}: {what} holds {t.dtype} values: save plain numeric arrays")
    return t


def _count(value, what: str, path: Path) -> int:
    a = np.asarray(value.cpu() if torch.is_tensor(value) else value).reshape(-1)
    if a.size != 1 or a.dtype.kind not in "iu" or int(a[0]) < 0:
        raise ConfigError(f"{path}: {what} must be one integer >= 0, got {a.tolist()[:4]}")
    return int(a[0])


def parts_from_npz(arrays: Mapping[str, np.ndarray | EdgeSource | RowSource], path: Path
                   ) -> dict:
    """The typed parts of an ``.npz`` in the typed layout: ``{"nodes": {type: {key: array}},
    "edges": {edge type: {key: array}}, "num_classes": ..., "node_types": ...}``."""
    nodes: dict[str, dict] = {}
    edges: dict[tuple, dict] = {}
    out: dict = {"nodes": nodes, "edges": edges}
    for name, a in arrays.items():
        if name in ("num_classes", "node_types"):
            out[name] = a
            continue
        m = _NODE.fullmatch(name)
        if m and SEP not in m.group(2):
            nodes.setdefault(m.group(2), {})[m.group(1)] = a
            continue
        m = _EDGE.fullmatch(name)
        if m:
            et = tuple(m.group(2).split(SEP))
            if len(et) != 3 or not all(et):
                raise ConfigError(f"{path}: member {name!r}: an edge type is "
                                  f"{m.group(1)}{SEP}<source>{SEP}<relation>{SEP}<destination> "
                                  f"(names without '{SEP}')")
            edges.setdefault(et, {})[m.group(1)] = a
            continue
        raise ConfigError(f"{path}: member {name!r} is not part of the typed .npz layout "
                          f"(<key>{SEP}<type> with key one of {', '.join(NODE_KEYS)}; "
                          f"<key>{SEP}<src>{SEP}<rel>{SEP}<dst> with key one of "
                          f"{', '.join(EDGE_KEYS)}; num_classes; node_types)")
    if "node_types" in out:
        nt = np.asarray(out["node_types"])
        if nt.dtype.kind != "U" or nt.ndim != 1:
            raise ConfigError(f"{path}: node_types must be a 1-D array of strings, got "
                              f"{nt.dtype} {nt.shape}")
        out["node_types"] = [str(t) for t in nt]
    return out


def read_typed_npz(path: Path, max_member_bytes: int, stage: Stage | None = None) -> dict:
    """The typed parts of ``path``, every member's declared size checked before it is read.
    With a ``stage`` (while a dataset is processed) the edge lists stay on disk, read in
    chunks by the CSC build (:class:`EdgeSource`), and the features are streamed in row
    chunks into the staging folder: one ``x`` when every node type has features of one
    width (the types' rows in global id order, as :meth:`GraphStore.from_typed` joins them),
    else ``x__<type>`` each; neither counts against the memory check."""
    try:
        with zipfile.ZipFile(path) as zf:
            members = scan_npz(zf, path, max_member_bytes, "dataset.max_member_gb")
            streamed = {n for n in members if stage is not None
                        and n.split(SEP, 1)[0] in ("edge_index", "x", "edge_attr")}
            total = sum(m.nbytes for n, m in members.items() if n not in streamed)
            if total > memory_budget():
                raise ConfigError(f"{path}: its arrays declare {size_text(total)}, more than "
                                  "half this host's memory")
            arrays = {name: _streamed(path, m, name) if name in streamed
                      else read_member(zf, m, path) for name, m in members.items()
                      if not (name in streamed and name.startswith("x"))}  # members' order
            parts = parts_from_npz(arrays, path)
            if stage is not None:
                _stream_features(zf, {n: members[n] for n in streamed if n.startswith("x")},
                                 parts, stage, path)
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        raise ConfigError(f"{path}: not a readable .npz file ({type(err).__name__}: {err})"
                          ) from err
    return parts


def _streamed(path: Path, member, name: str) -> EdgeSource | RowSource:
    """An edge list or edge features left on disk, read in chunks by the CSC build."""
    if name.startswith(f"edge_attr{SEP}"):
        try:
            return RowSource(path, member.info, name)
        except ValueError as err:
            raise ConfigError(f"{path}: {err}") from None
    return EdgeSource.member(path, member.info, name)


def _stream_features(zf: zipfile.ZipFile, members: dict, parts: dict, stage: Stage,
                     path: Path) -> None:
    """Stream the ``x__<type>`` members into ``stage`` and put them into ``parts`` (one
    ``x`` of every type, each type's rows a view of it, when they share one width)."""
    nodes = parts["nodes"]
    for name in members:
        t = name.split(SEP, 1)[1]
        if SEP in t:
            raise ConfigError(f"{path}: member {name!r} is not part of the typed .npz layout")
        nodes.setdefault(t, {})
    shapes = {name.split(SEP, 1)[1]: m.shape for name, m in members.items()}
    cols = {t: math.prod(sh[1:]) if len(sh) > 1 else 1 for t, sh in shapes.items()}
    order = node_order(parts, path)
    chunk = stage.chunk_bytes
    try:
        if order and set(order) == set(cols) and len(set(cols.values())) == 1:
            rows = [shapes[t][0] if shapes[t] else 1 for t in order]
            x = stage.features(
                (c for t in order for c in member_chunks(zf, members[f"x{SEP}{t}"].info,
                                                         chunk_bytes=chunk)),
                sum(rows), cols[order[0]])
            parts["x"] = x
            for t, a, b in zip(order, np.cumsum([0, *rows[:-1]]), np.cumsum(rows)):
                nodes[t]["x"] = x[int(a):int(b)]
            return
        for t in cols:
            sh = shapes[t]
            nodes[t]["x"] = stage.features(member_chunks(zf, members[f"x{SEP}{t}"].info,
                                                         chunk_bytes=chunk),
                                           sh[0] if sh else 1, cols[t], name=f"x{SEP}{t}")
    except ConfigError as err:  # NaN/Inf values, found while streaming
        raise ConfigError(f"{path}: {err}") from None
    except (ValueError, EOFError, zlib.error) as err:
        raise ConfigError(f"{path}: a feature member cannot be read ({err}): the file is "
                          "damaged; write it again with np.savez") from err


def node_order(parts: dict, path: Path) -> list[str]:
    """The node types in global id order: ``node_types`` when given (each once), else every
    type named by a node array or an edge type, sorted."""
    nodes, edges = parts["nodes"], parts["edges"]
    named = set(nodes) | {t for et in edges for t in (et[0], et[2])}
    order = parts.get("node_types")
    if order is not None:
        unknown = [t for t in order if t not in nodes]
        if unknown:
            known = ", ".join(sorted(nodes)) or "none"
            raise ConfigError(f"{path}: node_types names {unknown[0]!r}, which has no "
                              f"num_nodes, x or y (node types with arrays: {known})")
        missing = sorted(set(nodes) - set(order))
        if missing or len(set(order)) != len(order):
            raise ConfigError(f"{path}: node_types {order} must list each node type once; "
                              f"{missing or 'a type twice'} (from the arrays) is not")
        return list(order)
    return sorted(named)


#: the nodes a type without x or y may always have, however few edges touch it
FEATURELESS_FLOOR = 1 << 20


def _bound_featureless(counts: dict[str, int], feats: dict, labels: dict, edge_index: dict,
                       path: Path) -> None:
    """A type with neither x nor y has only ``num_nodes`` to say how many nodes it has:
    bounded, as the flat loader bounds a featureless graph, by twice the edges that touch
    it (nodes numbered densely; at least 2^20 nodes are always allowed), so a forged
    count is refused before anything is allocated."""
    for t, n in counts.items():
        if t in feats or t in labels:
            continue
        touching = sum(int(ei.shape[1]) for et, ei in edge_index.items()
                       if t in (et[0], et[2]) and len(ei.shape) == 2)
        if n > max(2 * touching, FEATURELESS_FLOOR):
            raise ConfigError(f"{path}: num_nodes{SEP}{t} = {n} for {touching} edges touching "
                              f"{t!r} and no x{SEP}{t} or y{SEP}{t} to back them: number its "
                              "nodes densely from 0, or give its features")


def hetero_classes() -> list:
    """The classes a ``torch.save``d ``HeteroData`` holds (allow-listed for ``torch.load``)."""
    from torch_geometric.data import HeteroData
    from torch_geometric.data.storage import (
        BaseStorage,
        EdgeStorage,
        GlobalStorage,
        NodeStorage,
    )

    return [HeteroData, BaseStorage, NodeStorage, EdgeStorage, GlobalStorage]


def parts_from_hetero(data: HeteroData, path: Path) -> dict:
    """The typed parts of a loaded ``HeteroData``."""
    nodes, edges = {}, {}
    for t in data.node_types:
        store = data[t]
        nodes[t] = {k: store[k] for k in store.keys() if k in NODE_KEYS}
        if "num_nodes" not in nodes[t] and "x" not in nodes[t] and "y" not in nodes[t]:
            nodes[t]["num_nodes"] = np.asarray(store.num_nodes)
    for et in data.edge_types:
        store = data[et]
        unknown = [k for k in store.keys() if k not in EDGE_KEYS]
        if unknown:
            raise ConfigError(f"{path}: edge type {et} holds {unknown}, which is not read "
                              f"(edge stores hold {', '.join(EDGE_KEYS)})")
        edges[tuple(et)] = {k: store[k] for k in store.keys()}
    out = {"nodes": nodes, "edges": edges, "node_types": list(data.node_types)}
    if "num_classes" in data._global_store:
        out["num_classes"] = data._global_store["num_classes"]
    return out


def graph_from_parts(parts: dict, path: Path, symmetrize: bool, train_ratio: float,
                     val_ratio: float, split_seed: int, stage: Stage | None = None
                     ) -> GraphStore:
    """Check the typed parts and build the typed graph (one line per problem; ``stage``:
    the CSC is built out of core into it, :meth:`GraphStore.from_typed`)."""
    nodes, edges = parts["nodes"], parts["edges"]
    node_types = node_order(parts, path)
    for et in edges:
        for end in (et[0], et[2]):
            if end not in nodes:
                known = ", ".join(sorted(nodes)) or "none"
                raise ConfigError(f"{path}: edge type {et} names node type {end!r}, which has "
                                  f"no num_nodes, x or y (node types: {known})")
    counts, feats, labels = _node_parts(nodes, node_types, path)
    splits = _node_splits(nodes, node_types, counts, labels, path, train_ratio, val_ratio,
                          split_seed)
    edge_index, weights, attrs = _edge_parts(edges, path)
    if "x" not in parts:
        _bound_featureless(counts, feats, labels, edge_index, path)
    num_classes = parts.get("num_classes")
    try:
        whole: dict[str, Any] = {"x": parts["x"]} if "x" in parts else {}
        return GraphStore.from_typed(
            counts, edge_index, features=None if whole else feats, y=labels or None,
            target_types=tuple(labels), edge_weight=weights or None, edge_attr=attrs or None,
            add_reverse=symmetrize, name=path.stem,
            num_classes=None if num_classes is None else _count(num_classes, "num_classes", path),
            meta={"source": str(path), "inferred_classes": num_classes is None},
            stage=stage, train_idx=splits["train_idx"] or None,
            val_idx=splits["val_idx"] or None, test_idx=splits["test_idx"] or None, **whole)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{path}: {err}") from err


def _node_parts(nodes: dict[str, dict], node_types: list[str], path: Path
                ) -> tuple[dict[str, int], dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """``(nodes, features, labels)`` per node type, each checked against the type's count
    (``num_nodes``, else the rows of ``x``, else the labels of ``y``)."""
    counts: dict[str, int] = {}
    feats: dict[str, torch.Tensor] = {}
    labels: dict[str, torch.Tensor] = {}
    for t in node_types:
        arr = nodes[t]
        x = None if arr.get("x") is None else _tensor(arr["x"], f"x{SEP}{t}", path)
        y = None if arr.get("y") is None else _tensor(arr["y"], f"y{SEP}{t}", path)
        given = None if arr.get("num_nodes") is None else _count(arr["num_nodes"],
                                                                 f"num_nodes{SEP}{t}", path)
        if given is not None:
            n = given
        elif x is not None:
            n = x.shape[0]
        elif y is not None:
            n = y.reshape(-1).numel()
        else:
            raise ConfigError(f"{path}: node type {t!r} has no num_nodes, x or y")
        if x is not None:
            x = x.reshape(-1, 1) if x.dim() == 1 else x
            if x.dim() != 2 or x.shape[0] != n:
                raise ConfigError(f"{path}: x{SEP}{t} has shape {tuple(x.shape)}: {n} rows "
                                  f"expected, one per {t!r} node")
            feats[t] = x.float()
        if y is not None:
            y = y.reshape(-1)
            if y.numel() != n or y.is_floating_point() or y.dtype == torch.bool:
                raise ConfigError(f"{path}: y{SEP}{t} must hold {n} integer labels (one per "
                                  f"{t!r} node, -1 = unlabelled), got {y.dtype} "
                                  f"{tuple(y.shape)}")
            labels[t] = y.long()
        counts[t] = n
    return counts, feats, labels


def _node_splits(nodes: dict[str, dict], node_types: list[str], counts: dict[str, int],
                 labels: dict[str, torch.Tensor], path: Path, train_ratio: float,
                 val_ratio: float, split_seed: int) -> dict[str, dict[str, torch.Tensor]]:
    """``{train_idx: {type: local ids}, ...}``: the splits given (ids or masks) per labelled
    type, drawn (``train_ratio``, ``val_ratio``, ``split_seed``) for one given none."""
    splits: dict[str, dict[str, torch.Tensor]] = {f"{s}_idx": {} for s in SPLITS}
    for t in node_types:
        for s in SPLITS:
            for kind in ("idx", "mask"):
                given = nodes[t].get(f"{s}_{kind}")
                if given is None:
                    continue
                if t not in labels:
                    raise ConfigError(f"{path}: target type {t!r} has a {s} split but no "
                                      f"labels: give y{SEP}{t}")
                v = _tensor(given, f"{s}_{kind}{SEP}{t}", path).reshape(-1)
                if kind == "mask" or v.dtype == torch.bool:
                    if v.numel() != counts[t]:
                        raise ConfigError(f"{path}: {s}_mask{SEP}{t} has {v.numel()} entries "
                                          f"for {counts[t]} {t!r} nodes")
                    v = v.bool().nonzero().reshape(-1)
                splits[f"{s}_idx"][t] = v.long()
    for t, y in labels.items():
        if not any(t in splits[f"{s}_idx"] for s in SPLITS):
            try:
                drawn = ratio_split(y, train_ratio, val_ratio, split_seed)
            except ValueError as err:
                raise ConfigError(f"{path}: {err}") from err
            for s in SPLITS:
                splits[f"{s}_idx"][t] = drawn[s]
    return splits


def _edge_parts(edges: dict[EdgeType, dict], path: Path
                ) -> tuple[dict[EdgeType, torch.Tensor | EdgeSource],
                           dict[EdgeType, torch.Tensor],
                           dict[EdgeType, torch.Tensor | RowSource]]:
    """``(edge lists, edge weights, edge features)`` per edge type, checked: integer ids,
    one weight and one feature row per edge (sources on disk kept as they are)."""
    edge_index: dict[EdgeType, torch.Tensor | EdgeSource] = {}
    weights: dict[EdgeType, torch.Tensor] = {}
    attrs: dict[EdgeType, torch.Tensor | RowSource] = {}
    for et, arr in edges.items():
        name = SEP.join(et)
        if arr.get("edge_index") is None:
            raise ConfigError(f"{path}: edge type {et} has no edge_index{SEP}{name}")
        ei = arr["edge_index"]
        if isinstance(ei, EdgeSource):
            if ei.dtype.kind not in "iu":
                raise ConfigError(f"{path}: edge_index{SEP}{name} must hold integer ids, got "
                                  f"{ei.dtype}")
        else:
            ei = _tensor(ei, f"edge_index{SEP}{name}", path)
            if ei.is_floating_point() or ei.dtype == torch.bool:
                raise ConfigError(f"{path}: edge_index{SEP}{name} must hold integer ids, got "
                                  f"{ei.dtype}")
        edge_index[et] = ei
        e = ei.shape[1] if len(ei.shape) == 2 else -1
        if arr.get("edge_attr") is not None:
            a = arr["edge_attr"] if isinstance(arr["edge_attr"], RowSource) else \
                _tensor(arr["edge_attr"], f"edge_attr{SEP}{name}", path)
            if a.shape[0] != e:
                raise _rows_error(f"edge_attr{SEP}{name}", a.shape[0], e, et, path)
            attrs[et] = a if isinstance(a, RowSource) else a.float()
        if arr.get("edge_weight") is not None:
            w = _tensor(arr["edge_weight"], f"edge_weight{SEP}{name}", path)
            if w.shape[0] != e or w.numel() != e:
                raise _rows_error(f"edge_weight{SEP}{name}", w.shape[0], e, et, path)
            weights[et] = w.float()
    return edge_index, weights, attrs


def _rows_error(what: str, rows: int, edges: int, et: EdgeType, path: Path) -> ConfigError:
    """The error of ``what`` not having one row per edge of ``et``."""
    return ConfigError(f"{path}: {what} has {rows} rows for the {edges} edges of {et}: one per "
                       "edge")
