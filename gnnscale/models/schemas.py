"""Typed schemas of the ``model`` options (torch-free: the launcher composes and checks a config
with these alone; each ``_target_`` names the model class a rank builds)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gnnscale.registry import register

NORMS = ("none", "batch", "layer")
REORDER = ("auto", "true", "false")


class GCNNorm(str, Enum):
    """Degrees of the edge weights: the sampled block's, or the whole graph's."""

    block = "block"
    graph = "graph"


GCN_NORMS = tuple(n.value for n in GCNNorm)
#: SAGE aggregators that split into sum-reducible partials (and weigh edges)
SPLIT_AGGRS = ("mean", "sum")


@dataclass
class ModelConfig:
    """Fields shared by every model; ``in_channels``/``out_channels`` come from the dataset."""

    _target_: str = ""
    hidden: int = 256
    num_layers: int = 3
    dropout: float = 0.5
    input_dropout: float = 0.0  # dropout on the input features (Kipf & Welling: 0.5)
    activation: str = "relu"
    norm: str = "none"
    reorder_update: str = "auto"
    residual: bool = False  # Platonov et al.'s residual blocks around every conv (see GNN)


@register("model", "gcn")
@dataclass
class GCNConfig(ModelConfig):
    """``model=gcn``'s options."""

    _target_: str = "gnnscale.models.gcn.GCN"
    gcn_norm: GCNNorm = GCNNorm.block


@register("model", "sage")
@dataclass
class SAGEConfig(ModelConfig):
    """``model=sage``'s options."""

    _target_: str = "gnnscale.models.sage.SAGE"
    aggr: str = "mean"


@register("model", "gat")
@dataclass
class GATConfig(ModelConfig):
    """``model=gat``'s options."""

    _target_: str = "gnnscale.models.gat.GAT"
    heads: int = 4
    out_heads: int = 1
    attn_dropout: float = 0.0


@register("model", "gin")
@dataclass
class GINConfig(ModelConfig):
    """``model=gin``'s options."""

    _target_: str = "gnnscale.models.gin.GIN"
    train_eps: bool = True
