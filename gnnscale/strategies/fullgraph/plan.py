"""How one rank runs the full-graph forward over its part: the seam between the ``fullgraph``
strategy and the ways of handling cross-part dependencies.

An edge-cut plan (DepCache, DepComm or the hybrid of both, NeutronStar) and a vertex-cut plan
(master/mirror reduce and broadcast, DeepGalois/Gluon) each implement :class:`FullGraphPlan`;
the strategy builds one at set-up and calls :meth:`FullGraphPlan.forward` once per epoch.

Both read layer 0's raw rows once, at set-up (:func:`raw_rows`: feature rows, or a typed
graph's :class:`~gnnscale.sampling.base.TypedInputs`), and run :meth:`GNN.encode` on them at
the start of every forward, so everything after handles dense rows (an exchange of layer-0
rows then carries encoded rows, and its backward carries their gradients back into the
owner's encoding: its linear maps and embedding rows). Their blocks carry what the model reads
of the edges (:func:`edge_fields`): on a typed graph each edge's id (its CSC position) and
type, and on an edge-cut, for a model that reads edge features, the rows of the graph's edge
features at those ids.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from gnnscale.cache.edges import EdgeFeatures
from gnnscale.cache.store import typed_inputs
from gnnscale.data.graph import GraphStore
from gnnscale.models.base import GNN
from gnnscale.sampling.base import Block, TypedInputs


class FullGraphPlan(ABC):
    """This rank's share of a full-graph forward pass (built once, run every epoch)."""

    #: Global ids of the vertices this rank is master of, sorted ascending.
    masters: torch.Tensor
    #: Layer 0's raw rows this rank reads (:func:`raw_rows`), held for the whole run.
    x: torch.Tensor | TypedInputs

    @abstractmethod
    def forward(self, model: GNN) -> torch.Tensor:
        """Output rows of this rank's masters (``masters`` order), differentiable with respect
        to the model's parameters; collective: every rank of the plan calls it together, and
        backward is collective too."""

    @abstractmethod
    def stats(self) -> dict[str, float]:
        """Per-epoch figures of this rank since the last call (bytes sent forward/backward,
        edges and vertex updates computed, replicated rows, ...); resets them."""


def raw_rows(graph: GraphStore, ids: torch.Tensor) -> torch.Tensor | TypedInputs:
    """Layer 0's raw rows of the global ``ids``: feature rows, or a typed graph's typed inputs
    (what :meth:`GNN.encode` reads)."""
    return typed_inputs(graph, ids) if graph.is_typed else graph.x[ids]


def raw_bytes(graph: GraphStore, rows: torch.Tensor | TypedInputs, skip: int = 0) -> int:
    """Bytes of the raw rows after the first ``skip`` (typed: the featured types' rows; a
    featureless row holds no bytes, only its id)."""
    if isinstance(rows, torch.Tensor):
        n = max(rows.shape[0] - skip, 0)
        return n * (rows.numel() // max(rows.shape[0], 1)) * rows.element_size()
    rest = rows.node_type[skip:]
    total = 0
    for t, feats in rows.features.items():
        n = int((rest == graph.node_types.index(t)).sum())
        total += n * (feats.numel() // max(feats.shape[0], 1)) * feats.element_size()
    return total


def sums_rows(model: GNN) -> bool:
    """Whether the model's aggregation is the base one: a sum over the block's edges of
    :meth:`GNN.edge_weight` times its (pre-normed) source rows, into their destinations, and no
    edge features read. The cached and overlapped products compute that from the edge weights
    alone (:mod:`.overlap`); a splittable model that aggregates its own way (overrides
    :meth:`GNN.aggregate` or :meth:`GNN.edge_sum`, e.g. a sum per relation) runs its own
    :meth:`GNN.aggregate` on a vertex-cut and its own conv on an edge-cut instead."""
    cls = type(model)
    return getattr(cls, "aggregate", None) is GNN.aggregate and \
        getattr(cls, "edge_sum", None) is GNN.edge_sum and not model.reads_edge_features


def edge_fields(graph: GraphStore, block: Block, e_id: torch.Tensor,
                edges: EdgeFeatures | None) -> Block:
    """Set ``block``'s edge ids ``e_id`` (CSC positions), their types on a typed graph, and
    their features through ``edges`` (counted there) when the model reads them; in place."""
    block.e_id = e_id
    if graph.type_per_edge is not None:
        block.edge_type = graph.type_per_edge[e_id].long()
    if edges is not None:
        edges.attach([block])
    return block


def in_edge_ids(graph: GraphStore, dst: torch.Tensor) -> torch.Tensor:
    """CSC positions of the in-edges of ``dst``, in the order :func:`~gnnscale.deps.planner
    .in_edges` lists them (destination by destination, each one's edges in CSC order)."""
    start = graph.indptr[dst]
    counts = graph.indptr[dst + 1] - start
    total = int(counts.sum())
    first = torch.cumsum(counts, 0) - counts  # each destination's first slot
    return torch.arange(total, dtype=torch.int64) + torch.repeat_interleave(start - first,
                                                                            counts)
