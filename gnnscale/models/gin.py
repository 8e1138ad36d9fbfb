"""GIN (Xu et al.) from PyG's GINConv with a two-layer MLP."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn
from torch_geometric.nn import GINConv

from gnnscale.models.base import GNN, ModelConfig
from gnnscale.registry import register


@register("model", "gin")
@dataclass
class GINConfig(ModelConfig):
    _target_: str = "gnnscale.models.gin.GIN"
    train_eps: bool = True


class GIN(GNN):
    def __init__(self, in_channels: int, out_channels: int, train_eps: bool = True, **kw) -> None:
        self.train_eps = train_eps
        super().__init__(in_channels, out_channels, **kw)

    def make_conv(self, layer: int, in_dim: int, out_dim: int) -> GINConv:
        mlp = nn.Sequential(nn.Linear(in_dim, out_dim), nn.ReLU(), nn.Linear(out_dim, out_dim))
        return GINConv(mlp, train_eps=self.train_eps)
