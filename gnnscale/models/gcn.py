"""GCN (Kipf & Welling) from PyG's GCNConv, with the normalisation chosen by ``norm``.

Every destination gets a self loop. The config's default ``gcn_norm=auto`` is settled by the
launcher from the strategy (graph for whole-graph strategies, block for sampling ones); the
class itself takes ``block`` or ``graph``. ``norm=block`` weighs edge ``(u, v)`` by
``1 / sqrt(deg_out(u) * deg_in(v))`` with degrees counted in the block (DGL's
``GraphConv(norm="both")``: the right choice for sampled neighbourhoods). ``norm=graph`` uses
the graph's own degrees, ``1 / sqrt((deg(u) + 1) (deg(v) + 1))``: with every neighbour
(fanout -1) this is exactly ``D^-1/2 (A + I) D^-1/2`` whatever the batch, i.e. full-graph GCN.

Weighted blocks (``block.edge_weight``, the random-walk sampler's visit counts; ``norm=block``
only, as the graph's degrees know nothing of a sample's weights): as PyG's GCNConv with
``edge_weight``, self loops weigh 1 and the degrees are weighted, edge ``(u, v)`` weighs
``w_uv / sqrt(wdeg_out(u) * wdeg_in(v))``, weighted degrees counted in the block with the
self loops; with all weights 1 this is ``norm=block``.

Split (``gcn_norm=graph`` only: block degrees do not add up across parts): ``aggregate`` sums
``x[u] / sqrt((deg(u) + 1) (deg(v) + 1))`` over the edges (no self loops); ``update`` adds the
self loop ``x_v / (deg(v) + 1)`` and applies ``lin`` and the bias. Reordered, ``lin`` moves
before the sum (exact: it is linear and bias-free; PyG's GCNConv itself runs that way).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch_geometric.nn import GCNConv

from gnnscale.data.graph import GraphStore
from gnnscale.models.base import GNN, csr_matrix
from gnnscale.models.schemas import GCNConfig
from gnnscale.sampling.base import Block


def _with_self_loops(block: Block) -> torch.Tensor:
    loop = torch.arange(block.num_dst, device=block.edge_index.device)
    return torch.cat([block.edge_index, torch.stack([loop, loop])], dim=1)


def block_gcn_norm(block: Block) -> tuple[torch.Tensor, torch.Tensor]:
    """Edge index with destination self loops and block-degree symmetric weights (weighted
    degrees and weights when the block carries ``edge_weight``)."""
    n_src, n_dst = block.size
    ei = _with_self_loops(block)
    if block.edge_weight is not None:
        w = block.edge_weight.float()
        w = torch.cat([w, torch.ones(n_dst, dtype=w.dtype, device=w.device)])
        deg_out = torch.zeros(n_src, device=ei.device).index_add_(0, ei[0], w)
        deg_in = torch.zeros(n_dst, device=ei.device).index_add_(0, ei[1], w)
        return ei, deg_out[ei[0]].rsqrt() * w * deg_in[ei[1]].rsqrt()
    ones = torch.ones(ei.shape[1], device=ei.device)
    deg_out = torch.zeros(n_src, device=ei.device).index_add_(0, ei[0], ones)
    deg_in = torch.zeros(n_dst, device=ei.device).index_add_(0, ei[1], ones)
    return ei, deg_out[ei[0]].rsqrt() * deg_in[ei[1]].rsqrt()


class GCN(GNN):
    """GCN normalised by block or graph degrees (``gcn_norm``, see the module docstring)."""

    schema = GCNConfig

    def __init__(self, in_channels: int, out_channels: int, gcn_norm: str = "block",
                 **kw: Any) -> None:
        GCNConfig(gcn_norm=gcn_norm).check()
        if gcn_norm == "auto":
            raise ValueError("model.gcn_norm=auto is the strategy's choice, made by the launcher "
                             "(runner/validate.py settle_model): build GCN with gcn_norm='block' "
                             "or 'graph'")
        super().__init__(in_channels, out_channels, **kw)
        self.gcn_norm = gcn_norm
        self.register_buffer("deg_inv_sqrt", None, persistent=False)

    def bind_graph(self, graph: GraphStore) -> None:
        """Keep every vertex's ``1 / sqrt(deg_in + 1)`` (for ``gcn_norm=graph`` and the split)."""
        deg = graph.in_degree().float() + 1.0
        self.deg_inv_sqrt = deg.rsqrt().to(next(self.parameters()).device)

    def make_conv(self, layer: int, in_dim: int, out_dim: int) -> GCNConv:
        """A GCNConv without its own self loops or normalisation (the edge weights carry them)."""
        return GCNConv(in_dim, out_dim, add_self_loops=False, normalize=False)

    def graph_norm(self, block: Block) -> tuple[torch.Tensor, torch.Tensor]:
        """Edge index with destination self loops and graph-degree symmetric weights."""
        if self.deg_inv_sqrt is None or block.src_ids is None:
            raise ValueError("model.gcn_norm=graph needs the graph's degrees (bind_graph) and "
                             "blocks that carry src_ids")
        ei = _with_self_loops(block)
        s = self.deg_inv_sqrt[block.src_ids.to(self.deg_inv_sqrt.device)]
        return ei, s[ei[0]] * s[ei[1]]

    def options(self) -> dict[str, Any]:
        """The shared options and ``gcn_norm``."""
        return {**super().options(), "gcn_norm": self.gcn_norm}

    def conv(self, layer: int, x: torch.Tensor, block: Block) -> torch.Tensor:
        """The GCNConv on the block as a sparse matrix of normalised weights (self loops too)."""
        if block.edge_weight is not None:
            why = self.why_not_weighted(self.options())
            if why is not None:
                raise ValueError(why)
        ei, w = self.graph_norm(block) if self.gcn_norm == "graph" else block_gcn_norm(block)
        e = block.num_edges  # ei is the block's edges, then one self loop per destination
        adj = csr_matrix(ei[0, :e], ei[1, :e], w[:e], block.size, x.dtype, loop_w=w[e:])
        return self.convs[layer](x, adj)

    def edge_weight(self, layer: int, block: Block) -> torch.Tensor:
        """``1 / sqrt((deg(u) + 1) (deg(v) + 1))`` per edge, with the bound graph's degrees."""
        if self.deg_inv_sqrt is None or block.src_ids is None:
            raise ValueError("GCN.aggregate needs the graph's degrees (bind_graph) and blocks "
                             "that carry src_ids")
        s = self.deg_inv_sqrt[block.src_ids.to(self.deg_inv_sqrt.device)]
        src, dst = block.edge_index
        return s[src] * s[dst]

    def pre_linear(self, layer: int) -> nn.Module:
        """The conv's ``lin``."""
        return self.convs[layer].lin

    def conv_update(self, layer: int, agg: torch.Tensor, x_dst: torch.Tensor,
                    dst_ids: torch.Tensor | None = None,
                    z_dst: torch.Tensor | None = None) -> torch.Tensor:
        """Adds the self loop ``x_v / (deg(v) + 1)``, then ``lin`` (unless reordered) and the
        bias."""
        self.check_splittable()
        if dst_ids is None or self.deg_inv_sqrt is None:
            raise ValueError("GCN.update needs the destinations' global ids and bind_graph")
        loop = self.deg_inv_sqrt[dst_ids.to(self.deg_inv_sqrt.device)].pow(2).unsqueeze(1)
        conv = self.convs[layer]
        out = conv.lin(agg + loop * x_dst) if z_dst is None else agg + loop * z_dst
        return out if conv.bias is None else out + conv.bias
