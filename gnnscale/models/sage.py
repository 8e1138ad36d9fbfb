"""GraphSAGE (Hamilton et al.) from PyG's SAGEConv."""

from __future__ import annotations

from dataclasses import dataclass

from torch_geometric.nn import SAGEConv

from gnnscale.models.base import GNN, ModelConfig
from gnnscale.registry import register


@register("model", "sage")
@dataclass
class SAGEConfig(ModelConfig):
    _target_: str = "gnnscale.models.sage.SAGE"
    aggr: str = "mean"


class SAGE(GNN):
    def __init__(self, in_channels: int, out_channels: int, aggr: str = "mean", **kw) -> None:
        self.aggr = aggr
        super().__init__(in_channels, out_channels, **kw)

    @property
    def preaggregatable(self) -> bool:
        return self.aggr in ("mean", "sum", "add")

    def make_conv(self, layer: int, in_dim: int, out_dim: int) -> SAGEConv:
        return SAGEConv(in_dim, out_dim, aggr=self.aggr)
