"""Module-level rank functions for the graph-store sharing test (spawn needs importable targets)."""

from __future__ import annotations

from pathlib import Path

from gnnscale.data import processed


def mapped_file(ptr: int) -> str | None:
    """The file backing the memory mapping that contains address ``ptr`` (None: anonymous)."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        lo, hi = (int(v, 16) for v in parts[0].split("-"))
        if lo <= ptr < hi:
            return parts[5] if len(parts) == 6 and parts[5].startswith("/") else None
    return None


def load_shared_rank(topo, path: str) -> dict:
    """Load the processed graph on a rank; report where its arrays live and a content hash."""
    graph = processed.load(path)
    return {
        "rank": topo.rank,
        "x_file": mapped_file(graph.x.data_ptr()),
        "indices_file": mapped_file(graph.indices.data_ptr()),
        "checksum": processed.checksum(graph),
    }
