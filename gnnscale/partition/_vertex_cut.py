"""Shared by the vertex-cut policies: where masters come from (``masters=``) and the quality of
that master assignment read as an edge-cut.

``masters=blocked`` is CuSP's contiguous id blocks (balanced vertices + edges): on an
id-shuffled graph that is random-level locality. Any edge-cut partitioner name (``metis``,
``random``, ``range``, ``ldg``, ``fennel``) gives the masters that partitioner's parts
(built with its defaults and this partitioner's seed) instead; the policy then places edges
relative to those masters as usual. On a typed graph the masters are balanced per node type
either way (blocked: each type's id range cut into blocks; an edge-cut: its per-type balance).
"""

from __future__ import annotations

import importlib
import inspect

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.partition._graph import blocked_masters
from gnnscale.partition.base import Partitioner
from gnnscale.partition.book import PartitionBook
from gnnscale.partition.quality import evaluate
from gnnscale.partition.schemas import EDGE_CUT_MASTERS, MASTER_SOURCES, VertexCutConfig


def edge_cut_partitioner(name: str, seed: int) -> Partitioner:
    """The edge-cut partitioner option ``name`` with its default settings."""
    if name not in EDGE_CUT_MASTERS:
        raise ValueError(f"partitioner.masters must be one of {MASTER_SOURCES} (an edge-cut "
                         f"partitioner or blocked), got {name!r}")
    module = importlib.import_module(f"gnnscale.partition.{name}")
    for obj in vars(module).values():
        if (inspect.isclass(obj) and issubclass(obj, Partitioner) and obj.kind == "edge_cut"
                and obj.__module__ == module.__name__):
            return obj(seed=seed)
    raise LookupError(f"gnnscale.partition.{name} defines no edge-cut Partitioner")


class VertexCutPartitioner(Partitioner):
    """Base of oec/iec/cvc/hvc: masters from ``masters`` (blocked or an edge-cut partitioner)."""

    kind = VertexCutConfig.kind

    def __init__(self, seed: int = 0, masters: str = "blocked") -> None:
        super().__init__(seed)
        VertexCutConfig(masters=masters).check()
        self.masters = masters

    def master_parts(self, graph: GraphStore, num_parts: int,
                     vertex_weight: torch.Tensor | None) -> torch.Tensor:
        """Master part of every vertex."""
        if self.masters == "blocked":
            return blocked_masters(graph, num_parts)
        return torch.as_tensor(edge_cut_partitioner(self.masters, self.seed)
                               .assign(graph, num_parts, vertex_weight)).long()

    def partition(self, graph: GraphStore, num_parts: int,
                  vertex_weight: torch.Tensor | None = None) -> PartitionBook:
        """The vertex-cut book; its quality also reports the masters read as an edge-cut
        (``masters_replication_factor``, ``masters_local_edge_ratio``)."""
        book = super().partition(graph, num_parts, vertex_weight)
        as_edge_cut = evaluate(graph, PartitionBook.from_edge_cut(graph, book.part, num_parts))
        book.quality["masters"] = self.masters
        book.quality["masters_replication_factor"] = as_edge_cut["replication_factor"]
        book.quality["masters_local_edge_ratio"] = as_edge_cut["local_edge_ratio"]
        return book
