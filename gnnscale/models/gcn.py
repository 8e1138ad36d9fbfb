"""GCN (Kipf & Welling) from PyG's GCNConv, normalised on each block.

On a block, every destination gets a self loop and edge ``(u, v)`` the weight
``1 / sqrt(deg_out(u) * deg_in(v))`` with degrees counted in the block (self loops included),
as DGL's ``GraphConv(norm="both")`` does. On the whole graph this is exactly
``D^-1/2 (A + I) D^-1/2``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch_geometric.nn import GCNConv

from gnnscale.models.base import GNN, ModelConfig
from gnnscale.registry import register
from gnnscale.sampling.base import Block


@register("model", "gcn")
@dataclass
class GCNConfig(ModelConfig):
    _target_: str = "gnnscale.models.gcn.GCN"


def block_gcn_norm(block: Block) -> tuple[torch.Tensor, torch.Tensor]:
    """Edge index with destination self loops and the symmetric normalisation weights."""
    n_src, n_dst = block.size
    loop = torch.arange(n_dst, device=block.edge_index.device)
    ei = torch.cat([block.edge_index, torch.stack([loop, loop])], dim=1)
    ones = torch.ones(ei.shape[1], device=ei.device)
    deg_out = torch.zeros(n_src, device=ei.device).index_add_(0, ei[0], ones)
    deg_in = torch.zeros(n_dst, device=ei.device).index_add_(0, ei[1], ones)
    w = deg_out[ei[0]].rsqrt() * deg_in[ei[1]].rsqrt()
    return ei, w


class GCN(GNN):
    def make_conv(self, layer: int, in_dim: int, out_dim: int) -> GCNConv:
        return GCNConv(in_dim, out_dim, add_self_loops=False, normalize=False)

    def conv(self, layer: int, x: torch.Tensor, block: Block) -> torch.Tensor:
        ei, w = block_gcn_norm(block)
        return self.convs[layer](x, ei, w)[: block.num_dst]
