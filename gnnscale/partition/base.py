"""Partitioner base class: ``partition(graph, num_parts) -> PartitionBook`` with its quality.

A subclass implements :meth:`assign`, returning the vertex -> part tensor (``kind="edge_cut"``)
or ``(master, edge_part)`` (``kind="vertex_cut"``). Every constructor argument is kept as an
attribute of the same name, so :meth:`config` can describe (and the cache can key) an instance.
"""

from __future__ import annotations

import inspect
import time
from abc import ABC, abstractmethod

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.partition._graph import check_num_parts
from gnnscale.partition.book import PartitionBook
from gnnscale.partition.quality import evaluate
from gnnscale.partition.schemas import PartitionerConfig


class Partitioner(ABC):
    """Base of every partitioner option."""

    kind: str = PartitionerConfig.kind

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)

    @property
    def name(self) -> str:
        """The option name (its module's name)."""
        return type(self).__module__.rsplit(".", 1)[-1]

    def config(self) -> dict:
        """Constructor arguments (plus ``_target_``): identifies the result for the cache."""
        cfg = {"_target_": f"{type(self).__module__}.{type(self).__qualname__}"}
        for cls in type(self).__mro__:
            if "__init__" in vars(cls):
                for arg in list(inspect.signature(vars(cls)["__init__"]).parameters)[1:]:
                    if hasattr(self, arg):
                        cfg.setdefault(arg, getattr(self, arg))
        return cfg

    @abstractmethod
    def assign(
        self, graph: GraphStore, num_parts: int, vertex_weight: torch.Tensor | None
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Vertex -> part, or ``(master, edge_part)`` for a vertex-cut."""

    def partition(
        self, graph: GraphStore, num_parts: int, vertex_weight: torch.Tensor | None = None
    ) -> PartitionBook:
        """Partition ``graph`` into ``num_parts`` parts; the book carries its quality figures."""
        check_num_parts(graph, num_parts)
        if vertex_weight is not None and torch.as_tensor(vertex_weight).numel() != graph.num_nodes:
            raise ValueError(f"vertex_weight needs one entry per vertex ({graph.num_nodes})")
        t0 = time.perf_counter()
        out = self.assign(graph, num_parts, vertex_weight)
        elapsed = time.perf_counter() - t0
        if self.kind == "vertex_cut":
            if not isinstance(out, tuple):
                raise TypeError(f"{self.name}: a vertex-cut's assign returns (master, edge_part)")
            book = PartitionBook.from_vertex_cut(graph, out[0], out[1], num_parts)
        else:
            if isinstance(out, tuple):
                raise TypeError(f"{self.name}: an edge-cut's assign returns one part per vertex")
            book = PartitionBook.from_edge_cut(graph, out, num_parts)
        book.quality = evaluate(graph, book, time_s=elapsed)
        book.quality["partitioner"] = self.name
        book.meta.update({"partitioner": self.config(), "graph": graph.name})
        return book
