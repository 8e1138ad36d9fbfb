"""The partition book: who owns each vertex (and edge), each part's mirrors, renumbered ranges.

Edge-cuts (``kind="edge_cut"``) assign vertices; an edge lives with its destination's part
(the part that aggregates it), so a part's *mirrors* are the remote sources of its in-edges.
Vertex-cuts (``kind="vertex_cut"``) assign every edge (``edge_part``, CSC order) and give each
vertex one *master* part (``part``); a part's mirrors are the vertices it holds an edge of
without being their master. Renumbering sorts vertices by part (stable), so the new ids of part
``q`` are ``part_ranges[q]:part_ranges[q + 1]`` and an owner is found by a range check.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from gnnscale.data.graph import GraphStore
from gnnscale.data.processed import publish_folder
from gnnscale.partition._graph import edge_dst, edge_src

KINDS = ("edge_cut", "vertex_cut")
BOOK_FORMAT = 1
_MASK_LIMIT = 1 << 30


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
        from gnnscale.partition.quality import format_table

        return format_table(self.quality)

    # ---- persistence ----------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write the book atomically to the folder ``path`` (concurrent savers are safe)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        try:
            small = np.int16 if self.num_parts < 2**15 else np.int64
            np.save(tmp / "part.npy", self.part.numpy().astype(small))
            np.save(tmp / "mirror_ids.npy", self.mirror_ids.numpy())
            np.save(tmp / "mirror_ptr.npy", self.mirror_ptr.numpy())
            if self.edge_part is not None:
                np.save(tmp / "edge_part.npy", self.edge_part.numpy().astype(small))
            info = {"format": BOOK_FORMAT, "num_parts": self.num_parts, "kind": self.kind,
                    "quality": self.quality, "meta": self.meta}
            (tmp / "book.json").write_text(json.dumps(info, indent=1, default=str))
            publish_folder(tmp, path, "book.json", replace=True)  # a recomputed book wins
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    @classmethod
    def load(cls, path: str | os.PathLike) -> PartitionBook:
        path = Path(path)
        info_file = path / "book.json"
        if not info_file.is_file():
            raise FileNotFoundError(f"no partition book at {path} (missing book.json)")
        info = json.loads(info_file.read_text())
        if info.get("format") != BOOK_FORMAT:
            raise ValueError(f"{path} holds book format {info.get('format')}: delete it")

        def arr(name: str) -> torch.Tensor:
            return torch.from_numpy(np.load(path / f"{name}.npy").astype(np.int64))

        edge_part = arr("edge_part") if (path / "edge_part.npy").is_file() else None
        return cls(info["num_parts"], info["kind"], arr("part"), arr("mirror_ids"),
                   arr("mirror_ptr"), edge_part=edge_part, quality=info["quality"],
                   meta=info["meta"])


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
