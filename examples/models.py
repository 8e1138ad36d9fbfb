"""PyG models as users write them, unmodified: ``model=custom model.target=examples.models.X``.

Each ``__init__`` takes ``in_channels`` and ``out_channels`` (gnnscale passes the dataset's
feature width and the task's output width); the rest goes in ``model.kwargs``. gnnscale traces
each ``forward`` into stages (:mod:`gnnscale.models.trace`), so every strategy runs them as
they are; ``tests/integration/test_traced_models.py`` trains each under all five strategies
against one process. On a typed graph ``model=to_hetero model.target=examples.models.SAGESkip``
converts one with PyG's ``to_hetero`` (gnnscale/models/to_hetero.py).
docs/bring-your-own-model.md walks through them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import (
    APPNP,
    GATv2Conv,
    GCNConv,
    GINEConv,
    JumpingKnowledge,
    SAGEConv,
    TransformerConv,
    global_mean_pool,
)


class SAGEJK(nn.Module):
    """GraphSAGE with JumpingKnowledge over every layer's output and a Linear head."""

    def __init__(self, in_channels: int, out_channels: int, hidden: int = 16,
                 num_layers: int = 2, mode: str = "cat", dropout: float = 0.5) -> None:
        super().__init__()
        self.convs = nn.ModuleList(SAGEConv(in_channels if i == 0 else hidden, hidden)
                                   for i in range(num_layers))
        self.jk = JumpingKnowledge(mode)
        self.lin = nn.Linear(hidden * num_layers if mode == "cat" else hidden, out_channels)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Every node's output rows (what gnnscale traces into stages)."""
        xs = []
        for conv in self.convs:
            x = F.relu(conv(x, edge_index))
            x = F.dropout(x, p=self.dropout, training=self.training)
            xs.append(x)
        return self.lin(self.jk(xs))


class GCNSkip(nn.Module):
    """An input Linear, GCN layers with a skip connection around each, a Linear head."""

    def __init__(self, in_channels: int, out_channels: int, hidden: int = 16,
                 num_layers: int = 2, dropout: float = 0.5) -> None:
        super().__init__()
        self.inp = nn.Linear(in_channels, hidden)
        self.convs = nn.ModuleList(GCNConv(hidden, hidden) for _ in range(num_layers))
        self.head = nn.Linear(hidden, out_channels)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Every node's output rows (what gnnscale traces into stages)."""
        x = F.relu(self.inp(x))
        for conv in self.convs:
            x = x + F.relu(conv(x, edge_index))
            x = F.dropout(x, p=self.dropout, training=self.training)
        return self.head(x)


class SAGESkip(nn.Module):
    """GCNSkip with SAGEConv layers (a skip from every layer's input, a Linear head)."""

    def __init__(self, in_channels: int, out_channels: int, hidden: int = 16,
                 num_layers: int = 2, dropout: float = 0.5) -> None:
        super().__init__()
        self.inp = nn.Linear(in_channels, hidden)
        self.convs = nn.ModuleList(SAGEConv(hidden, hidden) for _ in range(num_layers))
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, out_channels)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Every node's output rows (what gnnscale traces into stages)."""
        x = F.relu(self.inp(x))
        for conv in self.convs:
            x = self.norm(x + F.relu(conv(x, edge_index)))
            x = F.dropout(x, p=self.dropout, training=self.training)
        return self.head(x)


class APPNPNet(nn.Module):
    """APPNP (Gasteiger et al.): an MLP, then ``K`` propagation steps with a teleport to its
    output; gnnscale runs each step as a stage (``K`` sampler fanouts)."""

    def __init__(self, in_channels: int, out_channels: int, hidden: int = 16, K: int = 3,
                 alpha: float = 0.1, dropout: float = 0.5) -> None:
        super().__init__()
        self.lin1 = nn.Linear(in_channels, hidden)
        self.lin2 = nn.Linear(hidden, out_channels)
        self.prop = APPNP(K, alpha)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Every node's output rows (what gnnscale traces into stages)."""
        x = F.dropout(x, p=self.dropout, training=self.training)
        x = F.relu(self.lin1(x))
        x = F.dropout(x, p=self.dropout, training=self.training)
        return self.prop(self.lin2(x), edge_index)


class Transformer(nn.Module):
    """A TransformerConv stack (Shi et al.): concatenated heads, ELU between layers."""

    def __init__(self, in_channels: int, out_channels: int, hidden: int = 8, heads: int = 2,
                 num_layers: int = 2, edge_dim: int | None = None) -> None:
        super().__init__()
        convs = [TransformerConv(in_channels, hidden, heads=heads, edge_dim=edge_dim)]
        for _ in range(num_layers - 2):
            convs.append(TransformerConv(hidden * heads, hidden, heads=heads, edge_dim=edge_dim))
        convs.append(TransformerConv(hidden * heads, out_channels, heads=1, edge_dim=edge_dim))
        self.convs = nn.ModuleList(convs)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor,
                edge_attr: torch.Tensor | None = None) -> torch.Tensor:
        """Every node's output rows (what gnnscale traces into stages)."""
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index, edge_attr=edge_attr)
            if i < len(self.convs) - 1:
                x = F.elu(x)
        return x


class GATv2Edge(nn.Module):
    """GATv2 whose attention reads edge features (``edge_dim``; ``model.kwargs.edge_dim=auto``
    takes the dataset's width): two named convs, ELU between."""

    def __init__(self, in_channels: int, out_channels: int, edge_dim: int, hidden: int = 8,
                 heads: int = 2) -> None:
        super().__init__()
        self.conv1 = GATv2Conv(in_channels, hidden, heads=heads, edge_dim=edge_dim)
        self.conv2 = GATv2Conv(hidden * heads, out_channels, heads=1, edge_dim=edge_dim)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor,
                edge_attr: torch.Tensor) -> torch.Tensor:
        """Every node's output rows (what gnnscale traces into stages)."""
        x = F.elu(self.conv1(x, edge_index, edge_attr))
        return self.conv2(x, edge_index, edge_attr)


class GINE(nn.Module):
    """GINE (Hu et al.): GIN whose messages add a projection of the edge features."""

    def __init__(self, in_channels: int, out_channels: int, edge_dim: int, hidden: int = 16,
                 num_layers: int = 2) -> None:
        super().__init__()
        dims = [in_channels] + [hidden] * num_layers
        self.convs = nn.ModuleList(
            GINEConv(nn.Sequential(nn.Linear(a, b), nn.ReLU(), nn.Linear(b, b)),
                     train_eps=True, edge_dim=edge_dim) for a, b in zip(dims, dims[1:]))
        self.head = nn.Linear(hidden, out_channels)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor,
                edge_attr: torch.Tensor) -> torch.Tensor:
        """Every node's output rows (what gnnscale traces into stages)."""
        for conv in self.convs:
            x = F.relu(conv(x, edge_index, edge_attr))
        return self.head(x)


class MeanPooled(nn.Module):
    """A graph-level model (a global mean pool after its convs): it cannot be staged, and
    is refused by the strategies that compute a layer's rows apart."""

    def __init__(self, in_channels: int, out_channels: int, hidden: int = 16) -> None:
        super().__init__()
        self.conv = SAGEConv(in_channels, hidden)
        self.lin = nn.Linear(hidden, out_channels)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Every node's output rows (what gnnscale traces into stages)."""
        h = F.relu(self.conv(x, edge_index))
        return self.lin(h - global_mean_pool(h, None))
