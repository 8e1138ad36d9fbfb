"""The partition book: who owns each vertex (and edge), each part's mirrors, renumbered ranges.

Edge-cuts (``kind="edge_cut"``) assign vertices; an edge lives with its destination's part
(the part that aggregates it), so a part's *mirrors* are the remote sources of its in-edges.
Vertex-cuts (``kind="vertex_cut"``) assign every edge (``edge_part``, CSC order) and give each
vertex one *master* part (``part``); a part's mirrors are the vertices it holds an edge of
without being their master. Renumbering sorts vertices by part (stable), so the new ids of part
``q`` are ``part_ranges[q]:part_ranges[q + 1]`` and an owner is found by a range check.

A saved book is verified like processed data (:mod:`gnnscale.data.processed`): ``book.json``
records every array's shape, dtype and SHA-256 digest and a checksum over itself; a load
hashes the arrays its verification stamp does not vouch for. A damaged, truncated or edited
file is a :class:`PartitionBookError` naming it (the cache then rebuilds the book).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from gnnscale.data.graph import GraphStore
from gnnscale.data.processed import (
    array_digest,
    load_npy,
    publish_folder,
    unverified,
    write_stamp,
)
from gnnscale.data.publish import temp_folder
from gnnscale.partition._graph import edge_dst, edge_src

KINDS = ("edge_cut", "vertex_cut")
BOOK_FORMAT = 2  # 2: digests and a checksum in book.json
ARRAYS = ("part", "mirror_ids", "mirror_ptr", "edge_part")
_MASK_LIMIT = 1 << 30


class PartitionBookError(ValueError):
    """A saved book whose files are damaged or changed; the message names the file."""

    def __init__(self, file: Path, problem: str) -> None:
        self.file = file
        super().__init__(f"{file}: {problem}")


def _info_checksum(info: dict) -> str:
    """Hash of ``book.json``'s content other than the checksum itself (JSON-normalised)."""
    body = {k: v for k, v in info.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32]


@dataclass(eq=False)
class PartitionBook:
    """Vertex (and edge) placement over ``num_parts`` parts plus its quality figures."""

    num_parts: int
    kind: str
    part: torch.Tensor
    mirror_ids: torch.Tensor
    mirror_ptr: torch.Tensor
    edge_part: torch.Tensor | None = None
    quality: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    #: the checksum of its saved ``book.json`` (set by :meth:`save` and :meth:`load`), which
    #: covers every array's digest: two copies with the same one hold the same book
    digest: str | None = None
    new_id: torch.Tensor = field(init=False)
    old_id: torch.Tensor = field(init=False)
    part_ranges: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind == "vertex_cut" and self.edge_part is None:
            raise ValueError("a vertex-cut book needs edge_part")
        self.part = self.part.long()
        self.old_id = torch.argsort(self.part, stable=True)
        self.new_id = torch.empty_like(self.old_id)
        self.new_id[self.old_id] = torch.arange(self.old_id.numel())
        counts = torch.bincount(self.part, minlength=self.num_parts)
        self.part_ranges = torch.zeros(self.num_parts + 1, dtype=torch.int64)
        self.part_ranges[1:] = torch.cumsum(counts, 0)

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def from_edge_cut(cls, graph: GraphStore, part: torch.Tensor, num_parts: int) -> PartitionBook:
        """Book of a vertex -> part assignment; mirrors are remote sources of in-edges."""
        part = torch.as_tensor(part).long()
        src, dst = edge_src(graph), edge_dst(graph)
        owner = part[dst]
        remote = part[src] != owner
        keys = owner[remote] * graph.num_nodes + src[remote]
        ids, ptr = _split_keys(keys, graph.num_nodes, num_parts)
        return cls(num_parts, "edge_cut", part, ids, ptr)

    @classmethod
    def from_vertex_cut(
        cls, graph: GraphStore, master: torch.Tensor, edge_part: torch.Tensor, num_parts: int
    ) -> PartitionBook:
        """Book of an edge -> part assignment with one master part per vertex."""
        master, edge_part = torch.as_tensor(master).long(), torch.as_tensor(edge_part).long()
        if edge_part.numel() != graph.num_edges:
            raise ValueError(
                f"edge_part has {edge_part.numel()} entries for {graph.num_edges} edges")
        keys = []
        for end in (edge_src(graph), edge_dst(graph)):
            away = edge_part != master[end]
            keys.append(edge_part[away] * graph.num_nodes + end[away])
        ids, ptr = _split_keys(torch.cat(keys), graph.num_nodes, num_parts)
        return cls(num_parts, "vertex_cut", master, ids, ptr, edge_part=edge_part)

    # ---- queries --------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        """Vertices in the graph."""
        return self.part.numel()

    @property
    def master(self) -> torch.Tensor:
        """Master part of every vertex (the owning part for edge-cuts)."""
        return self.part

    @property
    def mirrors(self) -> list[torch.Tensor]:
        """Per part, the sorted (old) ids of the vertices it holds a copy of but does not own."""
        return list(torch.split(self.mirror_ids, torch.diff(self.mirror_ptr).tolist()))

    def owned(self, q: int) -> torch.Tensor:
        """Old ids of the vertices part ``q`` owns, in new-id order."""
        return self.old_id[self.part_ranges[q] : self.part_ranges[q + 1]]

    def owner_of_new(self, ids: torch.Tensor) -> torch.Tensor:
        """Part owning each *new* id, by a range check on ``part_ranges``."""
        return torch.searchsorted(self.part_ranges, torch.as_tensor(ids).long(), right=True) - 1

    def edge_owner(self, graph: GraphStore) -> torch.Tensor:
        """Part of every edge in CSC order (the destination's part for edge-cuts)."""
        if self.edge_part is not None:
            return self.edge_part
        return self.part[edge_dst(graph)]

    def report(self) -> str:
        """The book's quality figures in a few lines."""
        return format_table(self.quality)

    # ---- persistence ----------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write the book atomically to the folder ``path`` (concurrent savers are safe)."""
        path = Path(path)
        tmp = temp_folder(path)  # named after this process: swept if it is killed
        try:
            small = np.int16 if self.num_parts < 2**15 else np.int64
            arrays = {"part": self.part.numpy().astype(small),
                      "mirror_ids": self.mirror_ids.numpy(), "mirror_ptr": self.mirror_ptr.numpy()}
            if self.edge_part is not None:
                arrays["edge_part"] = self.edge_part.numpy().astype(small)
            for name, a in arrays.items():
                np.save(tmp / f"{name}.npy", np.ascontiguousarray(a))
            info = {"format": BOOK_FORMAT, "num_parts": self.num_parts, "kind": self.kind,
                    "quality": self.quality, "meta": self.meta,
                    "arrays": {name: {"shape": list(a.shape), "dtype": a.dtype.str,
                                      "sha256": array_digest(np.ascontiguousarray(a))}
                               for name, a in arrays.items()}}
            info = json.loads(json.dumps(info, default=str))  # what a load reads back
            info["checksum"] = _info_checksum(info)
            (tmp / "book.json").write_text(json.dumps(info, indent=1))
            write_stamp(tmp, ["book.json", *(f"{n}.npy" for n in arrays)], settle=True)
            publish_folder(tmp, path, "book.json", replace=True)  # a recomputed book wins
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.digest = info["checksum"]

    def fingerprint(self) -> str:
        """What identifies this book: its saved checksum (:attr:`digest`), or, for a book never
        saved, a digest of its placement arrays."""
        if self.digest is not None:
            return self.digest
        h = hashlib.sha256(f"{self.num_parts}:{self.kind}".encode())
        for t in (self.part, self.edge_part):
            if t is not None:
                h.update(t.numpy().tobytes())
        return h.hexdigest()[:32]

    def payload(self) -> dict:
        """What :meth:`from_payload` rebuilds the book from (tensors and plain values): the
        book sent to a rank that lacks it."""
        return {"num_parts": self.num_parts, "kind": self.kind, "part": self.part,
                "mirror_ids": self.mirror_ids, "mirror_ptr": self.mirror_ptr,
                "edge_part": self.edge_part, "quality": self.quality, "meta": self.meta,
                "digest": self.digest}

    @classmethod
    def from_payload(cls, payload: dict) -> PartitionBook:
        """The book :meth:`payload` described."""
        return cls(payload["num_parts"], payload["kind"], payload["part"],
                   payload["mirror_ids"], payload["mirror_ptr"],
                   edge_part=payload["edge_part"], quality=payload["quality"],
                   meta=payload["meta"], digest=payload["digest"])

    @classmethod
    def load(cls, path: str | os.PathLike, verify: bool | None = None) -> PartitionBook:
        """Read a saved book, verified: ``verify=None`` hashes the arrays the folder's
        verification stamp does not vouch for, ``True`` all of them, ``False`` none. A
        damaged or edited file is a :class:`PartitionBookError` naming it; a book of another
        format is a plain ValueError."""
        path = Path(path)
        info_file = path / "book.json"
        if not info_file.is_file():
            raise FileNotFoundError(f"no partition book at {path} (missing book.json)")
        try:
            info = json.loads(info_file.read_text())
            if "checksum" not in info and info.get("format") != BOOK_FORMAT:
                raise ValueError(f"{path} holds book format {info.get('format')}, this "
                                 f"gnnscale reads {BOOK_FORMAT}: delete it")
            listed = info["arrays"]
            if not {"part", "mirror_ids", "mirror_ptr"} <= set(listed) <= set(ARRAYS):
                raise KeyError(f"arrays {sorted(listed)}")
            if not all(isinstance(spec, dict) and {"shape", "dtype", "sha256"} <= set(spec)
                       for spec in listed.values()):
                raise KeyError("every array needs shape, dtype and sha256")
            if _info_checksum(info) != info["checksum"]:
                raise PartitionBookError(info_file, "checksum mismatch: it was edited since "
                                         "it was written")
            if info["format"] != BOOK_FORMAT:  # intact, from another gnnscale version
                raise ValueError(f"{path} holds book format {info['format']}, this gnnscale "
                                 f"reads {BOOK_FORMAT}: delete it")
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError,
                AttributeError) as err:
            raise PartitionBookError(info_file, f"not a valid book.json ({err})") from err
        arrays = {}
        for name, spec in listed.items():
            file = path / f"{name}.npy"
            try:
                a = load_npy(file)
            except (OSError, ValueError, EOFError) as err:
                raise PartitionBookError(file, f"cannot be read ({err})") from err
            if list(a.shape) != spec["shape"] or a.dtype.str != spec["dtype"]:
                raise PartitionBookError(file, f"shape {list(a.shape)} / dtype {a.dtype.str} "
                                         f"do not match book.json ({spec['shape']} / "
                                         f"{spec['dtype']})")
            arrays[name] = a
        names = ["book.json", *(f"{n}.npy" for n in arrays)]
        todo = set(names) if verify else unverified(path, names) if verify is None else set()
        if "book.json" in todo:  # the digests themselves may be new: check every array
            todo = set(names)
        for name in arrays:
            if f"{name}.npy" in todo and array_digest(arrays[name]) != listed[name]["sha256"]:
                raise PartitionBookError(path / f"{name}.npy", "checksum mismatch: its content "
                                         "changed since it was written")
        if todo:
            write_stamp(path, names)
        ids = {name: torch.from_numpy(a.astype(np.int64, copy=False))
               for name, a in arrays.items()}
        try:
            return cls(info["num_parts"], info["kind"], ids["part"], ids["mirror_ids"],
                       ids["mirror_ptr"], edge_part=ids.get("edge_part"),
                       quality=info["quality"], meta=info["meta"], digest=info["checksum"])
        except (ValueError, TypeError, RuntimeError, KeyError) as err:
            raise PartitionBookError(info_file, f"does not describe a valid book ({err})"
                                     ) from err


def _split_keys(keys: torch.Tensor, n: int, num_parts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Unique ``part * n + vertex`` keys -> (vertex ids grouped by part, per-part offsets)."""
    n = max(n, 1)
    if num_parts * n <= _MASK_LIMIT:  # a bitmap beats sorting by far
        seen = np.zeros(num_parts * n, dtype=bool)
        seen[keys.numpy()] = True
        keys = torch.from_numpy(np.flatnonzero(seen).astype(np.int64))
    else:
        keys = torch.unique(keys)
    ptr = torch.zeros(num_parts + 1, dtype=torch.int64)
    ptr[1:] = torch.cumsum(torch.bincount(keys // n, minlength=num_parts), 0)
    return keys % n, ptr


#: the summary figures of :func:`format_table`, in its order
SUMMARY_KEYS = (
    "local_edge_ratio", "edge_cut_fraction", "replication_factor", "balance_vertices",
    "balance_edges", "balance_train", "partners_max", "partners_mean", "time_s",
)


def _fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)


def format_table(q: dict) -> str:
    """The summary figures, then one row per part."""
    head = f"partition quality: {q.get('kind')}, {q.get('num_parts')} parts"
    if q.get("partitioner"):
        head += f", partitioner {q['partitioner']}"
    lines = [head]
    lines += [f"  {k:<20} {_fmt(q.get(k))}" for k in SUMMARY_KEYS]
    if "masters" in q:  # a vertex-cut: its masters read as an edge-cut
        lines.append(f"  masters ({q['masters']}) as an edge-cut: replication_factor "
                     f"{_fmt(q.get('masters_replication_factor'))}, local_edge_ratio "
                     f"{_fmt(q.get('masters_local_edge_ratio'))}")
    if q.get("balance_per_type"):
        lines.append("  balance per node type: " + ", ".join(
            f"{t} {_fmt(b)}" for t, b in q["balance_per_type"].items()))
    per = q.get("per_part") or {}
    cols = [c for c in ("vertices", "edges", "train", "mirrors", "partners") if per.get(c)]
    if cols:
        lines.append("  " + f"{'part':>5}" + "".join(f"{c:>12}" for c in cols))
        for i in range(q["num_parts"]):
            lines.append("  " + f"{i:>5}" + "".join(f"{per[c][i]:>12}" for c in cols))
    return "\n".join(lines)
