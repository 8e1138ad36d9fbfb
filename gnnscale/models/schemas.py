"""Typed schemas of the ``model`` options (torch-free: the launcher composes and checks a config
with these alone; each ``_target_`` names the model class a rank builds).

A schema also knows what its model can do, from the config alone: whether its convs split into
aggregate and update (:attr:`ModelConfig.splittable`), whether a sender may pre-aggregate
(:attr:`ModelConfig.preaggregatable`), whether it weighs edges (:meth:`why_not_weighted`) and
the row width of every layer (:meth:`ModelConfig.widths`). Strategies' launcher checks read
these; the model classes answer the same questions through their schema (``GNN.spec``), so the
two cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.schema import Options, require_at_least, require_one_of, require_range

NORMS = ("none", "batch", "layer")
REORDER = ("auto", "true", "false")
ACTIVATION_NAMES = ("elu", "gelu", "leaky_relu", "relu", "tanh")


class GCNNorm(str, Enum):
    """Degrees of the edge weights: the sampled block's, or the whole graph's."""

    block = "block"
    graph = "graph"


GCN_NORMS = tuple(n.value for n in GCNNorm)
#: SAGE aggregators that split into sum-reducible partials (and weigh edges)
SPLIT_AGGRS = ("mean", "sum")
#: SAGE aggregators a sender may apply to its own edges before shipping one row
PREAGGREGATABLE_AGGRS = ("mean", "sum", "add")
EDGE_CUTS = "metis, random, range, ldg, fennel"


@dataclass
class ModelConfig(Options):
    """Fields shared by every model; ``in_channels``/``out_channels`` come from the dataset."""

    #: the model's name in messages
    title: ClassVar[str] = "GNN"
    #: Whether it trains typed graphs (per-type inputs, per-relation weights) and needs one;
    #: a model that does not is refused a typed dataset at launch (models/typed_input.py).
    trains_types: ClassVar[bool] = False
    _target_: str = ""
    hidden: int = 256
    num_layers: int = 3
    dropout: float = 0.5
    input_dropout: float = 0.0  # dropout on the input features (Kipf & Welling: 0.5)
    activation: str = "relu"
    norm: str = "none"
    reorder_update: str = "auto"
    residual: bool = False  # Platonov et al.'s residual blocks around every conv (see GNN)

    def check(self) -> None:
        """Sizes >= 1, known choices, dropouts in [0, 1), and what residual blocks refuse."""
        for key in ("hidden", "num_layers"):
            require_at_least(f"model.{key}", getattr(self, key), 1)
        reorder = str(self.reorder_update).lower()
        if reorder not in REORDER:
            raise ConfigError(f"model.reorder_update must be one of {REORDER}, "
                              f"got {self.reorder_update!r}")
        require_one_of("model.activation", self.activation, list(ACTIVATION_NAMES))
        require_one_of("model.norm", self.norm, NORMS)
        for key in ("dropout", "input_dropout"):
            require_range(f"model.{key}", getattr(self, key), 0, 1)
        if self.residual and self.norm == "batch":
            raise ConfigError("model.residual normalises every source row before aggregating; "
                              "batch statistics would then depend on which rows a strategy "
                              "holds (replicas, halos): use model.norm=layer (Platonov et al.) "
                              "or none")
        if self.residual and reorder == "true":
            raise ConfigError("model.residual normalises source rows before the conv, so its "
                              "linear cannot move before the aggregation: set "
                              "model.reorder_update=auto or false")

    @property
    def splittable(self) -> bool:
        """Whether the convs split into a sum over edges (aggregate) and the rest (update)."""
        return True

    def why_not_splittable(self) -> str | None:
        """None when the convs split into aggregate and update, else the reason."""
        return None if self.splittable else (
            f"{self.title} cannot be split into aggregate and update")

    @property
    def preaggregatable(self) -> bool:
        """True when a sender may average its edges into a remote destination and ship one
        row, exactly (a mean/sum aggregation of the raw source rows, as SAGE's)."""
        return False

    @property
    def linear_aggregate(self) -> bool:
        """Whether the aggregate is linear in its source rows (split, and no pre-norm)."""
        return self.splittable and not self.residual

    @property
    def batch_norm(self) -> bool:
        """Whether hidden layers normalise over the rows a forward holds (``norm=batch``)."""
        return self.norm == "batch"

    def why_not_weighted(self) -> str | None:
        """None when the model aggregates blocks that carry ``edge_weight``, else the
        reason."""
        return None

    def widths(self, in_dim: int, out_dim: int) -> list[int]:
        """Widths of the rows of layers 0..L: the input features, then each layer's output
        (what strategies ship and store between layers)."""
        return [in_dim] + [self.hidden] * (self.num_layers - 1) + [out_dim]


@register("model", "gcn")
@dataclass
class GCNConfig(ModelConfig):
    """``model=gcn``'s options."""

    title: ClassVar[str] = "GCN"
    _target_: str = "gnnscale.models.gcn.GCN"
    gcn_norm: GCNNorm = GCNNorm.block

    def check(self) -> None:
        """The shared checks and a known normalisation."""
        super().check()
        require_one_of("model.gcn_norm", self.gcn_norm, GCN_NORMS)

    @property
    def splittable(self) -> bool:
        """True for ``gcn_norm=graph`` only (block degrees do not add up across parts)."""
        return self.gcn_norm == GCNNorm.graph.value

    def why_not_splittable(self) -> str | None:
        """None for ``gcn_norm=graph``, else why block degrees cannot be split."""
        if self.splittable:
            return None
        return ("GCN with model.gcn_norm=block weighs edges by degrees inside each block, which "
                "do not add up across parts: use model.gcn_norm=graph to split it")

    def why_not_weighted(self) -> str | None:
        """None for ``gcn_norm=block``; the graph's degrees cannot weigh visit counts."""
        if self.gcn_norm == GCNNorm.block.value:
            return None
        return ("GCN with model.gcn_norm=graph normalises by the graph's degrees, which know "
                "nothing of the visit counts sampler=random_walk gives as edge weights: use "
                "model.gcn_norm=block (weighted degrees, as PyG's GCNConv with edge_weight)")


@register("model", "sage")
@dataclass
class SAGEConfig(ModelConfig):
    """``model=sage``'s options."""

    title: ClassVar[str] = "SAGE"
    _target_: str = "gnnscale.models.sage.SAGE"
    aggr: str = "mean"

    @property
    def splittable(self) -> bool:
        """True for ``aggr`` mean or sum."""
        return self.aggr in SPLIT_AGGRS

    def why_not_splittable(self) -> str | None:
        """None for ``aggr`` mean or sum, else the reason."""
        if self.splittable:
            return None
        return (f"SAGE with model.aggr={self.aggr!r} cannot be split into aggregate and update "
                f"(sum-reducible partials): use model.aggr in {SPLIT_AGGRS}")

    @property
    def preaggregatable(self) -> bool:
        """True for mean, sum and add without residual blocks."""
        return self.aggr in PREAGGREGATABLE_AGGRS and not self.residual

    def why_not_weighted(self) -> str | None:
        """None for mean (PinSAGE's importance pooling) or sum, else the reason."""
        if self.aggr in SPLIT_AGGRS:
            return None
        return (f"SAGE with model.aggr={self.aggr!r} cannot weigh edges (sampler=random_walk "
                f"gives visit counts as edge weights): use model.aggr=mean (PinSAGE's "
                f"importance pooling) or sum")


@register("model", "gat")
@dataclass
class GATConfig(ModelConfig):
    """``model=gat``'s options."""

    title: ClassVar[str] = "GAT"
    _target_: str = "gnnscale.models.gat.GAT"
    heads: int = 4
    out_heads: int = 1
    attn_dropout: float = 0.0

    def check(self) -> None:
        """The shared checks, and hidden channels that the heads divide."""
        super().check()
        if self.heads < 1 or self.hidden % self.heads:
            raise ConfigError(f"model.hidden ({self.hidden}) must be a multiple of "
                              f"model.heads ({self.heads})")

    @property
    def splittable(self) -> bool:
        """Never: attention weighs each edge by a softmax over all of the destination's
        in-edges, so a partial aggregate over some of them is not a summand of the whole."""
        return False

    def why_not_splittable(self) -> str:
        """Always a reason: the attention softmax spans all of a vertex's in-edges."""
        return ("GAT cannot be split into aggregate and update (its attention softmax spans all "
                "of a vertex's in-edges), so it cannot run on a vertex-cut: use an edge-cut "
                f"partitioner ({EDGE_CUTS})")

    def why_not_weighted(self) -> str:
        """Always a reason: attention learns its own edge weights."""
        return ("GAT learns its own edge weights (attention) and cannot use the visit counts "
                "sampler=random_walk gives as edge weights: use model=sage (PinSAGE's "
                "importance pooling), gcn or gin, or sampler=neighbor")


@register("model", "gin")
@dataclass
class GINConfig(ModelConfig):
    """``model=gin``'s options."""

    title: ClassVar[str] = "GIN"
    _target_: str = "gnnscale.models.gin.GIN"
    train_eps: bool = True


#: R-GCN's aggregations over each relation's edges
RGCN_AGGRS = ("mean", "add")


@register("model", "rgcn")
@dataclass
class RGCNConfig(ModelConfig):
    """``model=rgcn``'s options: R-GCN (Schlichtkrull et al.) on typed graphs, one weight per
    relation (edge type), ``num_bases`` > 0 shares them as combinations of that many bases."""

    title: ClassVar[str] = "R-GCN"
    trains_types: ClassVar[bool] = True
    _target_: str = "gnnscale.models.rgcn.RGCN"
    num_bases: int = 0  # 0: a full weight per relation; else the basis decomposition
    aggr: str = "mean"

    def check(self) -> None:
        """The shared checks, bases >= 0, a known aggregation, no residual blocks."""
        super().check()
        require_at_least("model.num_bases", self.num_bases, 0)
        require_one_of("model.aggr", self.aggr, RGCN_AGGRS)
        if self.residual:
            raise ConfigError("model=rgcn has no residual blocks yet: set model.residual=false")

    @property
    def splittable(self) -> bool:
        """Not yet: a layer sums one transform per relation, which aggregate/update do not
        express."""
        return False

    def why_not_splittable(self) -> str:
        """Always a reason (for now)."""
        return ("R-GCN is not split into aggregate and update yet (a layer sums one transform "
                "per relation): train it with strategy=data")

    def why_not_weighted(self) -> str:
        """Always a reason: R-GCN weighs each relation, not each edge."""
        return ("R-GCN aggregates each relation's edges alike and cannot use the visit counts "
                "sampler=random_walk gives as edge weights: use sampler=neighbor")

    def widths(self, in_dim: int, out_dim: int) -> list[int]:
        """The typed input's rows (``hidden`` wide, whatever the feature widths), then each
        layer's output."""
        return [self.hidden] * self.num_layers + [out_dim]
