"""GINE (Hu et al., "Strategies for Pre-training Graph Neural Networks"), from PyG's GINEConv:
GIN whose every message is ``relu(x_u + W e_uv)``, ``e_uv`` the edge's features
(``block.edge_attr``, gathered by the strategy) projected to the source rows' width by a learned
linear (``edge_dim``: ``model.edge_dim``, ``auto`` = the dataset's edge feature width, filled
in when the model is built).

Each message reads its edge's features, so GINE is not split into aggregate and update
(vertex-cuts refuse it) and takes no edge weights (random-walk edges are not graph edges).
"""

from __future__ import annotations

from typing import Any

from torch import nn
from torch_geometric.nn import GINEConv

from gnnscale.models.base import GNN
from gnnscale.models.schemas import GINEConfig


class GINE(GNN):
    """GINE with a two-layer MLP per conv, a learned edge projection and, with
    ``train_eps``, a learned ``eps``."""

    schema = GINEConfig
    sparse_conv = False  # a message per edge (it reads the edge's features)

    def __init__(self, in_channels: int, out_channels: int, edge_dim: int | None = None,
                 train_eps: bool = True, **kw: Any) -> None:
        if not isinstance(edge_dim, int) or isinstance(edge_dim, bool):
            raise ValueError(f"GINE needs edge_dim, the edge feature width, got {edge_dim!r} "
                             "(the runner fills model.edge_dim=auto in)")
        GINEConfig(edge_dim=edge_dim, train_eps=train_eps).check()
        self.edge_dim, self.train_eps = int(edge_dim), train_eps
        super().__init__(in_channels, out_channels, **kw)

    def options(self) -> dict:
        """The base options and ``edge_dim``."""
        return {**super().options(), "edge_dim": self.edge_dim}

    def make_conv(self, layer: int, in_dim: int, out_dim: int) -> GINEConv:
        """A GINEConv on ``Linear, ReLU, Linear``, projecting edge features to ``in_dim``."""
        mlp = nn.Sequential(nn.Linear(in_dim, out_dim), nn.ReLU(), nn.Linear(out_dim, out_dim))
        return GINEConv(mlp, train_eps=self.train_eps, edge_dim=self.edge_dim)
