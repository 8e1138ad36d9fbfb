"""GraphSAGE (Hamilton et al.) from PyG's SAGEConv.

Split (``aggr`` mean or sum): ``aggregate`` sums ``x[u] / deg(v)`` (mean, with ``v``'s in-degree
in the bound graph) or ``x[u]`` (sum) over the edges; ``update`` is
``lin_l(agg) + lin_r(x_v)``. Reordered, ``lin_l``'s weight moves before the sum (exact: the
mean and the sum are linear) and its bias stays in ``update``.

Weighted blocks (``block.edge_weight``, the random-walk sampler's visit counts): ``mean`` is
PinSAGE's importance pooling, edge ``(u, v)`` weighs ``w_uv / sum of w over v's edges in the
block``; ``sum`` weighs it ``w_uv``; other aggregators refuse weighted blocks.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch_geometric.nn import SAGEConv

from gnnscale.data.graph import GraphStore
from gnnscale.models.base import GNN
from gnnscale.models.schemas import SAGEConfig
from gnnscale.sampling.base import Block


class SAGE(GNN):
    """GraphSAGE with aggregator ``aggr`` (mean or sum to split or weigh edges)."""

    schema = SAGEConfig

    def __init__(self, in_channels: int, out_channels: int, aggr: str = "mean", **kw: Any) -> None:
        self.aggr = aggr
        super().__init__(in_channels, out_channels, **kw)
        self.register_buffer("in_deg", None, persistent=False)

    def options(self) -> dict[str, Any]:
        """The shared options and ``aggr``."""
        return {**super().options(), "aggr": self.aggr}

    def bind_graph(self, graph: GraphStore) -> None:
        """Keep every vertex's in-degree (the split mean divides by it)."""
        self.in_deg = graph.in_degree().float().to(next(self.parameters()).device)

    @property
    def sparse_conv(self) -> bool:  # type: ignore[override]
        """True for mean, sum and add (a sparse matrix product); False for max and the others."""
        return self.aggr in ("mean", "sum", "add")

    def make_conv(self, layer: int, in_dim: int, out_dim: int) -> SAGEConv:
        """A SAGEConv with ``aggr``."""
        return SAGEConv(in_dim, out_dim, aggr=self.aggr)

    def edge_weight(self, layer: int, block: Block) -> torch.Tensor | None:
        """Weighted blocks: importance weights (mean) or the raw weights (sum); else
        ``1 / deg(v)`` (mean) or None (sum)."""
        if block.edge_weight is not None:
            return importance_weights(block) if self.aggr == "mean" else block.edge_weight
        if self.aggr == "sum":
            return None
        dst = block.edge_index[1]
        if self.in_deg is not None:
            deg = self.in_deg[self.dst_ids(block).to(self.in_deg.device)]
        else:  # the block holds every in-edge of its destinations
            deg = torch.bincount(dst, minlength=block.num_dst).float()
        return deg.clamp(min=1.0).reciprocal()[dst]

    def pre_linear(self, layer: int) -> nn.Module:
        """The conv's ``lin_l``."""
        return self.convs[layer].lin_l

    def conv_update(self, layer: int, agg: torch.Tensor, x_dst: torch.Tensor,
                    dst_ids: torch.Tensor | None = None,
                    z_dst: torch.Tensor | None = None) -> torch.Tensor:
        """``lin_l(agg) + lin_r(x_v)``; reordered, only ``lin_l``'s bias is added to ``agg``."""
        self.check_splittable()
        conv = self.convs[layer]
        out = conv.lin_l(agg) if z_dst is None else agg + conv.lin_l.bias
        return out + conv.lin_r(x_dst)


def importance_weights(block: Block) -> torch.Tensor:
    """PinSAGE's importance pooling: each edge's weight over the sum of the weights of its
    destination's edges in the block (a weighted mean; a destination without edges gets 0)."""
    w, dst = block.edge_weight, block.edge_index[1]
    total = torch.zeros(block.num_dst, dtype=w.dtype, device=w.device).index_add_(0, dst, w)
    return w / total.clamp(min=torch.finfo(w.dtype).tiny)[dst]
