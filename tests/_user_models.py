"""Models written the way PyG users write them, outside gnnscale (``model=custom`` targets).

The layer-wise ones follow the contract of docs/bring-your-own-model.md (a ``convs``
ModuleList and a vertex-wise ``between``); their own ``forward(x, edge_index)`` is what a user
runs without gnnscale (``GATv2EdgeNet``'s also takes ``edge_attr``). ``TutorialGCN`` is
traced into stages (two named convs); ``CenteredGCN`` is whole-graph-only (it mixes rows
outside message passing).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GATv2Conv, GCNConv, GINConv, GraphConv, SAGEConv


class GraphConvNet(nn.Module):
    """Morris et al.'s GraphConv (sum aggregation), ReLU between layers."""

    def __init__(self, in_channels: int, out_channels: int, hidden: int = 16,
                 num_layers: int = 2) -> None:
        super().__init__()
        dims = [in_channels] + [hidden] * (num_layers - 1) + [out_channels]
        self.convs = nn.ModuleList(GraphConv(a, b) for a, b in zip(dims, dims[1:]))

    def between(self, i: int, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return F.relu(h)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        for i, conv in enumerate(self.convs):
            h = conv(x, edge_index)
            x = self.between(i, h, x) if i < len(self.convs) - 1 else h
        return x


class GATv2Net(nn.Module):
    """GATv2 (Brody et al.): concatenated heads in hidden layers, one head last, ELU between."""

    def __init__(self, in_channels: int, out_channels: int, hidden: int = 8, heads: int = 2,
                 num_layers: int = 2) -> None:
        super().__init__()
        convs = [GATv2Conv(in_channels, hidden, heads=heads)]
        for _ in range(num_layers - 2):
            convs.append(GATv2Conv(hidden * heads, hidden, heads=heads))
        convs.append(GATv2Conv(hidden * heads, out_channels, heads=1))
        self.convs = nn.ModuleList(convs)

    def between(self, i: int, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return F.elu(h)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        for i, conv in enumerate(self.convs):
            h = conv(x, edge_index)
            x = self.between(i, h, x) if i < len(self.convs) - 1 else h
        return x


class GATv2EdgeNet(nn.Module):
    """GATv2Net whose attention reads edge features (``edge_dim``: their width; gnnscale fills
    ``model.kwargs.edge_dim=auto`` with the dataset's)."""

    def __init__(self, in_channels: int, out_channels: int, edge_dim: int, hidden: int = 8,
                 heads: int = 2, num_layers: int = 2) -> None:
        super().__init__()
        convs = [GATv2Conv(in_channels, hidden, heads=heads, edge_dim=edge_dim)]
        for _ in range(num_layers - 2):
            convs.append(GATv2Conv(hidden * heads, hidden, heads=heads, edge_dim=edge_dim))
        convs.append(GATv2Conv(hidden * heads, out_channels, heads=1, edge_dim=edge_dim))
        self.convs = nn.ModuleList(convs)

    def between(self, i: int, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return F.elu(h)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor,
                edge_attr: torch.Tensor) -> torch.Tensor:
        for i, conv in enumerate(self.convs):
            h = conv(x, edge_index, edge_attr=edge_attr)
            x = self.between(i, h, x) if i < len(self.convs) - 1 else h
        return x


class ResGIN(nn.Module):
    """GIN with a LayerNorm and a residual around every hidden layer."""

    def __init__(self, in_channels: int, out_channels: int, hidden: int = 16,
                 num_layers: int = 3) -> None:
        super().__init__()
        dims = [in_channels] + [hidden] * (num_layers - 1) + [out_channels]
        self.convs = nn.ModuleList(
            GINConv(nn.Sequential(nn.Linear(a, b), nn.ReLU(), nn.Linear(b, b)), train_eps=True)
            for a, b in zip(dims, dims[1:]))
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(num_layers - 1))

    def between(self, i: int, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.norms[i](h))
        return h + x if x.shape[-1] == h.shape[-1] else h

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        for i, conv in enumerate(self.convs):
            h = conv(x, edge_index)
            x = self.between(i, h, x) if i < len(self.convs) - 1 else h
        return x


class TutorialGCN(nn.Module):
    """The PyG tutorial's two-layer GCN (two named convs): traced into stages."""

    def __init__(self, in_channels: int, out_channels: int, hidden: int = 16) -> None:
        super().__init__()
        self.conv1 = GCNConv(in_channels, hidden)
        self.conv2 = GCNConv(hidden, out_channels)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.conv2(F.relu(self.conv1(x, edge_index)), edge_index)


class CenteredGCN(TutorialGCN):
    """TutorialGCN centring its hidden rows on the graph's mean: a step that mixes rows
    outside message passing, so it cannot be staged (whole-graph-only)."""

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.conv1(x, edge_index))
        return self.conv2(h - h.mean(dim=0, keepdim=True), edge_index)


class BatchNormGIN(ResGIN):
    """ResGIN with batch norms: its statistics span the rows a forward holds."""

    def __init__(self, in_channels: int, out_channels: int, hidden: int = 16,
                 num_layers: int = 2) -> None:
        super().__init__(in_channels, out_channels, hidden, num_layers)
        self.norms = nn.ModuleList(nn.BatchNorm1d(hidden) for _ in range(num_layers - 1))


class BatchNormSAGE(nn.Module):
    """Two SAGEConvs with a BatchNorm1d between (batch statistics over the rows a forward
    holds): traced into stages, run by the strategies that run a whole sampled block
    (data, factored) and refused by the others."""

    def __init__(self, in_channels: int, out_channels: int, hidden: int = 16,
                 num_layers: int = 2, dropout: float = 0.0) -> None:
        super().__init__()
        # no bias before the norm: it cancels it, leaving a gradient of rounding noise only
        self.conv1 = SAGEConv(in_channels, hidden, bias=False)
        self.norm = nn.BatchNorm1d(hidden)
        self.conv2 = SAGEConv(hidden, out_channels)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.norm(self.conv1(x, edge_index)))
        h = F.dropout(h, p=self.dropout, training=self.training)
        return self.conv2(h, edge_index)


LAYER_WISE = {"graphconv": GraphConvNet, "gatv2": GATv2Net, "resgin": ResGIN}
#: layer-wise models that read edge features (data and factored on graphs that have them)
EDGE_READING = {"gatv2edge": GATv2EdgeNet}
WHOLE_GRAPH = {"centered": CenteredGCN}
#: models users have, unmodified (examples/models.py and PyG's own classes), which gnnscale
#: traces into stages (gnnscale/models/trace.py): key -> (model.target, model.kwargs); their
#: own dropout (p=0.5) is kept and keyed
PYG = "torch_geometric.nn.models"
TRACED = {
    "t_sage": (f"{PYG}.GraphSAGE", {"hidden_channels": 8, "dropout": 0.5}),
    "t_sage_cat": (f"{PYG}.GraphSAGE", {"hidden_channels": 8, "dropout": 0.5, "jk": "cat"}),
    "t_sage_max": (f"{PYG}.GraphSAGE", {"hidden_channels": 8, "dropout": 0.5, "jk": "max"}),
    "t_sage_lstm": (f"{PYG}.GraphSAGE", {"hidden_channels": 8, "dropout": 0.5, "jk": "lstm"}),
    "t_gcn_last": (f"{PYG}.GCN", {"hidden_channels": 8, "dropout": 0.5, "jk": "last"}),
    "t_gin": (f"{PYG}.GIN", {"hidden_channels": 8, "dropout": 0.5}),
    "t_gat": (f"{PYG}.GAT", {"hidden_channels": 4, "heads": 2}),  # attention dropout: 0
    "t_sagejk": ("examples.models.SAGEJK", {"hidden": 8, "dropout": 0.5}),
    "t_gcnskip": ("examples.models.GCNSkip", {"hidden": 8, "dropout": 0.5}),
    "t_sageskip": ("examples.models.SAGESkip", {"hidden": 8, "dropout": 0.5}),
    "t_transformer": ("examples.models.Transformer", {"hidden": 4}),
    "t_appnp": ("examples.models.APPNPNet", {"hidden": 8, "dropout": 0.5}),  # K: the layers
    # PNA's degree histogram from the graph it trains on (model.kwargs.deg=auto)
    "t_pna": (f"{PYG}.PNA", {"hidden_channels": 8, "dropout": 0.5, "deg": "auto",
                             "aggregators": ["mean", "min", "max", "std"],
                             "scalers": ["identity", "amplification", "attenuation"]}),
    "t_edgecnn": (f"{PYG}.EdgeCNN", {"hidden_channels": 8, "dropout": 0.5}),  # x_j - x_i
}
#: traced models that read edge features (given ``edge_dim``; GATv2Edge has two named convs)
TRACED_EDGES = {
    "t_transformer_e": ("examples.models.Transformer", {"hidden": 4}),
    "t_gine": ("examples.models.GINE", {"hidden": 8}),
    "t_gatv2e": ("examples.models.GATv2Edge", {"hidden": 4}),
}


def wrap(name: str, in_channels: int, out_channels: int, num_layers: int,
         dropout: float = 0.0, input_dropout: float = 0.0, edge_dim: int | None = None,
         graph=None):
    """``user_<key>`` of :data:`LAYER_WISE`, :data:`EDGE_READING` (give ``edge_dim``) or
    :data:`WHOLE_GRAPH` as ``model=custom`` builds
    it: by its dotted path, with ``num_layers`` (and ``edge_dim``, when given) in its kwargs
    (gnnscale's dropouts keyed by vertex id); ``deg=auto`` filled from ``graph`` as a run
    fills it (the schema's ``graph_inputs``)."""
    from gnnscale.models.custom import Custom

    key = name.removeprefix("user_")
    if key in TRACED or key in TRACED_EDGES:  # its own dropout, keyed; model.dropout 0
        target, kwargs = {**TRACED, **TRACED_EDGES}[key]
        kwargs = dict(kwargs)
        if "dropout" in kwargs:
            kwargs["dropout"] = dropout
        if key == "t_appnp":  # its K propagation steps are its stages
            kwargs["K"] = num_layers
        elif key != "t_gatv2e":
            kwargs["num_layers"] = num_layers
        if edge_dim is not None:
            kwargs["edge_dim"] = edge_dim
        if kwargs.get("deg") == "auto":
            from gnnscale.models.schemas import CustomModelConfig

            if graph is None:
                raise ValueError(f"{name} takes the graph's degree histogram: give graph=")
            kwargs.update(CustomModelConfig(target=target, kwargs=kwargs)
                          .graph_inputs(graph)["kwargs"])
        return Custom(in_channels, out_channels, target=target, kwargs=kwargs,
                      input_dropout=input_dropout)
    if key in WHOLE_GRAPH:  # its forward reads two hops
        return Custom(in_channels, out_channels,
                      target=f"{__name__}.{WHOLE_GRAPH[key].__name__}",
                      num_layers=2, input_dropout=input_dropout)
    cls = LAYER_WISE[key] if key in LAYER_WISE else EDGE_READING[key]
    kwargs = {"num_layers": num_layers}
    if edge_dim is not None:
        kwargs["edge_dim"] = edge_dim
    return Custom(in_channels, out_channels, target=f"{__name__}.{cls.__name__}",
                  kwargs=kwargs, dropout=dropout,
                  input_dropout=input_dropout)
