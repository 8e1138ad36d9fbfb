"""Edge features of sampled blocks, gathered where the node features are (the trainer side).

A model that reads edge features (``model=gat model.edge_dim=auto``, ``model=gine``, a user's
conv with ``edge_dim``) needs each block's ``edge_attr``: the rows of the graph's edge feature
matrix (one ``[E, D]`` matrix in CSC order, memory-mapped like the node features) at the
block's edge ids. :class:`EdgeFeatures` reads them from the host table by ``block.e_id`` and
puts them on the rank's device; the strategies that sample (``data``, ``factored``) call it
where they gather a mini-batch's node features: ``DataParallel.gather`` (through the feature
store) and ``DataParallel.host_gather`` (from the host table: a factored sampler training
standby jobs, the allocation profile), through :func:`attach_host`.

They are gathered from the edge ids on the rank that trains, not carried by the mini-batch
codec: a sampler process, a factored sampler rank or the shared queue ships 8 bytes per edge
(its ``e_id``) instead of ``4 * D`` (the rows), and the rows are read once, by the rank that
uses them. Every row is read from the host (no cache tier): ``bytes_edge_features`` counts
them (summed over ranks).
"""

from __future__ import annotations

import torch

from gnnscale.cache.store import _host_rows
from gnnscale.data.graph import GraphStore
from gnnscale.distributed import device as device_seam
from gnnscale.sampling.base import Block


def edge_table(graph: GraphStore) -> torch.Tensor:
    """The graph's one edge feature matrix ``[E, D]`` (CSC order), or a one-line error."""
    if graph.edge_attr is None:
        if graph.type_edge_attr:
            raise ValueError("the graph's edge types have edge features of different widths "
                             "(type_edge_attr): no model reads those yet; give every edge type "
                             "features of one width, or use a model without edge_dim")
        raise ValueError("the model reads edge features (edge_dim) but the graph has none: "
                         "use a dataset with edge_attr, or leave model.edge_dim unset")
    return graph.edge_attr


class EdgeFeatures:
    """Attaches ``edge_attr[e_id]`` to sampled blocks, on ``device``, and counts the bytes."""

    def __init__(self, graph: GraphStore, device: torch.device | str = "cpu") -> None:
        self.table = edge_table(graph)
        self.device = torch.device(device)
        self.row_bytes = self.table.shape[1] * self.table.element_size()
        self.bytes = 0

    def attach(self, blocks: list[Block]) -> list[Block]:
        """Set every block's ``edge_attr`` (in place; the blocks must carry ``e_id``)."""
        for block in blocks:
            if block.e_id is None:
                raise ValueError("the model reads edge features, but a sampled block carries "
                                 "no edge ids (e_id): use a sampler of graph edges "
                                 "(sampler=neighbor or full)")
            rows = gather_edge_rows(self.table, block.e_id)
            self.bytes += rows.numel() * rows.element_size()
            rows = rows if rows.dtype == torch.float32 else rows.float()
            block.edge_attr = device_seam.to_device(rows, self.device)
        return blocks

    def epoch_stats(self) -> dict[str, float]:
        """``bytes_edge_features`` since :meth:`reset_epoch`."""
        return {"bytes_edge_features": float(self.bytes)}

    def reset_epoch(self) -> None:
        """Zero the byte count."""
        self.bytes = 0


def attach_host(graph: GraphStore, blocks: list[Block]) -> list[Block]:
    """Every block's ``edge_attr`` from the host table, on the host, not counted (a standby
    trainer's or a profile's, which read node rows from the host table too)."""
    return EdgeFeatures(graph).attach(blocks)


def gather_edge_rows(table: torch.Tensor, e_id: torch.Tensor) -> torch.Tensor:
    """``table[e_id]`` on the host (the native multi-threaded gather when built), as stored
    (:meth:`EdgeFeatures.attach` casts to float32 for the convs)."""
    return _host_rows(table, e_id.cpu().long())
