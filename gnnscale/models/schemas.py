"""Typed schemas of the ``model`` options (torch-free: the launcher composes and checks a config
with these alone; each ``_target_`` names the model class a rank builds). ``model=custom``, a
user's own module, is the one whose checks import it (and torch) to read its contract.

A schema also knows what its model can do, from the config alone: whether its convs split into
aggregate and update (:attr:`ModelConfig.splittable`), whether a sender may pre-aggregate
(:attr:`ModelConfig.preaggregatable`), whether it weighs edges (:meth:`why_not_weighted`) and
the row width of every layer (:meth:`ModelConfig.widths`), whether it trains on the whole graph
(:meth:`ModelConfig.why_not_whole_graph`) and layer by layer
(:meth:`ModelConfig.why_not_layer_by_layer`), and which ``auto`` options take which value under
a strategy (:meth:`ModelConfig.settle`, asked by ``StrategyConfig.model_defaults``).
Strategies' launcher checks read these; the model classes answer the same questions through
their schema (``GNN.spec``), so the two cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, Optional

from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.schema import Options, require_at_least, require_one_of, require_range

NORMS = ("none", "batch", "layer")
REORDER = ("auto", "true", "false")
ACTIVATION_NAMES = ("elu", "gelu", "leaky_relu", "relu", "tanh")


class GCNNorm(str, Enum):
    """Degrees of the edge weights: the sampled block's, the whole graph's, or ``auto``: the
    strategy's choice at launch (:meth:`GCNConfig.settle`)."""

    auto = "auto"
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

    def settle(self, whole_graph: bool) -> dict[str, tuple[Any, str]]:
        """The options left to the run (``auto``) and the value each takes under a strategy
        that trains on the whole graph (``whole_graph``) or on sampled mini-batches, with why:
        ``{key: (value, reason)}``. The launcher sets them before any check (default none)."""
        return {}

    @property
    def block_degrees(self) -> bool:
        """Whether a conv weighs edges by degrees counted in its block (a split plan then
        counts them over the whole block: GCN with ``gcn_norm=block``)."""
        return False

    def why_not_whole_graph(self) -> str | None:
        """None when the model trains on the whole graph (fullgraph, offload), else the reason
        (the key to change)."""
        return None

    def why_not_layer_by_layer(self) -> str | None:
        """None when the model runs one conv at a time on any subset of a layer's rows with
        only vertex-wise steps between its convs (what split, fullgraph and offload need), else
        the reason. Every built-in model does."""
        return None

    @property
    def reads_edge_features(self) -> bool:
        """Whether its convs read the blocks' edge features (``edge_attr``): a model with an
        ``edge_dim`` option set (``auto`` or a width)."""
        return getattr(self, "edge_dim", None) is not None

    @property
    def edge_width(self) -> int | None:
        """The edge feature width it was given (None: not given, or ``auto``)."""
        dim = getattr(self, "edge_dim", None)
        return dim if isinstance(dim, int) and not isinstance(dim, bool) else None

    def edge_inputs(self, width: int) -> dict[str, Any]:
        """Build arguments that fill ``edge_dim=auto`` with ``width``, the dataset's edge
        feature width (0: the graph has none, refused in one line)."""
        if getattr(self, "edge_dim", None) != "auto":
            return {}
        if width <= 0:
            raise ConfigError(f"{self.title} reads edge features (model.edge_dim=auto) but the "
                              "graph has none: use a dataset with edge features, or set "
                              "model.edge_dim=null")
        return {"edge_dim": int(width)}


def check_edge_dim(value: Any, key: str = "model.edge_dim") -> None:
    """``value`` must be None (no edge features), ``auto`` (the dataset's width) or a width >= 1."""
    if value is None or value == "auto":
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{key} must be auto (the dataset's edge feature width), a width >= 1 "
                          f"or null (no edge features), got {value!r}")


@register("model", "gcn")
@dataclass
class GCNConfig(ModelConfig):
    """``model=gcn``'s options."""

    title: ClassVar[str] = "GCN"
    _target_: str = "gnnscale.models.gcn.GCN"
    gcn_norm: GCNNorm = GCNNorm.auto

    def check(self) -> None:
        """The shared checks and a known normalisation."""
        super().check()
        require_one_of("model.gcn_norm", self.gcn_norm, GCN_NORMS)

    def settle(self, whole_graph: bool) -> dict[str, tuple[Any, str]]:
        """``gcn_norm=auto``: the graph's degrees when the strategy trains on the whole graph
        (its blocks hold every edge, and the parts of a layer must add up), the block's when
        it samples mini-batches (as PyG's ``GCNConv`` normalises a sampled subgraph)."""
        if str(getattr(self.gcn_norm, "value", self.gcn_norm)) != GCNNorm.auto.value:
            return {}
        if whole_graph:
            return {"gcn_norm": ("graph", "the strategy trains on the whole graph: GCN takes "
                                          "the graph's degrees")}
        return {"gcn_norm": ("block", "the strategy samples mini-batches: GCN takes each "
                                      "block's degrees")}

    @property
    def block_degrees(self) -> bool:
        """True for ``gcn_norm=block``."""
        return self.gcn_norm == GCNNorm.block.value

    def why_not_whole_graph(self) -> str | None:
        """``gcn_norm=block`` (set by hand) on the whole graph: the graph's degrees it needs."""
        if str(getattr(self.gcn_norm, "value", self.gcn_norm)) != GCNNorm.block.value:
            return None
        return ("GCN with model.gcn_norm=block weighs edges by each block's degrees, but the "
                "strategy trains on the whole graph, where GCN needs the graph's own degrees: "
                "set model.gcn_norm=graph (or auto, which does)")

    @property
    def splittable(self) -> bool:
        """True for ``gcn_norm=graph`` only (block degrees do not add up across parts)."""
        return self.gcn_norm == GCNNorm.graph.value

    def why_not_splittable(self) -> str | None:
        """None for ``gcn_norm=graph``, else why block degrees cannot be split."""
        if self.splittable:
            return None
        norm = str(getattr(self.gcn_norm, "value", self.gcn_norm))
        if norm == GCNNorm.auto.value:
            return ("GCN with model.gcn_norm=auto has not been given its normalisation (the "
                    "launcher sets it from the strategy): use model.gcn_norm=graph to split it")
        return ("GCN with model.gcn_norm=block weighs edges by degrees inside each block, which "
                "do not add up across parts: use model.gcn_norm=graph to split it")

    def why_not_weighted(self) -> str | None:
        """None for ``gcn_norm=block`` (and ``auto``, which is block under a sampling
        strategy); the graph's degrees cannot weigh visit counts."""
        if self.gcn_norm in (GCNNorm.block.value, GCNNorm.auto.value):
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


def why_not_keyed_attention(p: float) -> str | None:
    """Why attention dropout of rate ``p`` keeps a model from the strategies that compute a
    layer's rows apart (they key every dropout mask by vertex so a replica draws its owner's;
    GAT's, R-GAT's and typed GAT's attention masks are torch's per edge), or None at 0."""
    if p <= 0:
        return None
    return (f"model.attn_dropout={p} drops attention coefficients with torch's generator, "
            "whose masks the ranks computing parts of a layer cannot agree on (set "
            "model.attn_dropout=0)")


@register("model", "gat")
@dataclass
class GATConfig(ModelConfig):
    """``model=gat``'s options."""

    title: ClassVar[str] = "GAT"
    _target_: str = "gnnscale.models.gat.GAT"
    heads: int = 4
    out_heads: int = 1
    attn_dropout: float = 0.0
    #: edge features each attention score reads (GATConv's ``edge_dim``): null (none), auto
    #: (the dataset's width) or a width
    edge_dim: Any = None

    def check(self) -> None:
        """The shared checks, hidden channels that the heads divide, an edge_dim."""
        super().check()
        check_edge_dim(self.edge_dim)
        if self.heads < 1 or self.hidden % self.heads:
            raise ConfigError(f"model.hidden ({self.hidden}) must be a multiple of "
                              f"model.heads ({self.heads})")

    def why_not_layer_by_layer(self) -> str | None:
        """Attention dropout: its masks are torch's (:func:`why_not_keyed_attention`)."""
        return why_not_keyed_attention(self.attn_dropout)

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


@register("model", "gine")
@dataclass
class GINEConfig(GINConfig):
    """``model=gine``'s options: GIN with edge features (Hu et al.'s GINEConv), each message
    ``relu(x_u + W e_uv)``; ``edge_dim``: auto (the dataset's width) or a width."""

    title: ClassVar[str] = "GINE"
    _target_: str = "gnnscale.models.gine.GINE"
    edge_dim: Any = "auto"

    def check(self) -> None:
        """The shared checks and an edge feature width (GINE reads them always)."""
        super().check()
        check_edge_dim(self.edge_dim)
        if self.edge_dim is None:
            raise ConfigError("model=gine reads edge features: set model.edge_dim=auto (the "
                              "dataset's width) or a width, or use model=gin")

    @property
    def splittable(self) -> bool:
        """Never (for now): each message reads its edge's features, which the split
        aggregate (a sparse product of source rows) does not."""
        return False

    def why_not_splittable(self) -> str:
        """Always a reason."""
        return ("GINE's messages read edge features, which aggregate/update do not carry: it "
                f"cannot run on a vertex-cut; use an edge-cut partitioner ({EDGE_CUTS})")

    def why_not_weighted(self) -> str:
        """Always a reason: random-walk edges are not graph edges (no edge features)."""
        return ("GINE reads each edge's features, and the edges sampler=random_walk gives are "
                "not graph edges: use sampler=neighbor")


@register("model", "custom")
@dataclass
class CustomModelConfig(Options):
    """``model=custom``'s options: the user's own ``nn.Module`` class (``target``, a dotted
    path), built with ``in_channels`` and ``out_channels`` from the dataset and task plus
    ``kwargs``. What it can do is read from the module itself (:mod:`gnnscale.models.contract`,
    which imports it: the one model option whose launcher checks import torch): a
    *layer-wise* model (a ``convs`` ModuleList of PyG convs, and a vertex-wise ``between``)
    runs under every strategy; any other module with ``forward(x, edge_index)`` is
    *whole-graph-only*, trained by the strategies that run it on each sampled subgraph
    (data, factored). Never split into aggregate and update, nor given edge weights."""

    title: ClassVar[str] = "model=custom"
    trains_types: ClassVar[bool] = False  # a user's convs see no node or edge types
    _target_: str = "gnnscale.models.custom.Custom"
    target: str = ""  # the user's nn.Module class, e.g. mypkg.models.MyGNN
    kwargs: dict[str, Any] = field(default_factory=dict)  # its other keyword arguments
    # message-passing layers (sampled hops): read from the module's convs when left null;
    # a whole-graph-only module needs it set
    num_layers: Optional[int] = None  # noqa: UP045 - OmegaConf reads typing.Optional
    dropout: float = 0.0  # after each between(), keyed by vertex id where a strategy keys it
    input_dropout: float = 0.0  # on the input features, keyed likewise

    def contract(self) -> Any:
        """What the module offers (:class:`gnnscale.models.contract.Contract`): the wrapped
        module's own when built (:meth:`GNN.spec`), else a probe built once per target and
        kwargs (imports torch and the target)."""
        known = self.__dict__.get("_contract")
        if known is not None:
            return known
        from gnnscale.models.contract import probe

        return probe(self.target, dict(self.kwargs))

    def check(self) -> None:
        """A target, dropouts in [0, 1), a module that imports and builds, and a number of
        layers that agrees with its convs (or is given, for a whole-graph-only module)."""
        if not self.target:
            raise ConfigError("model=custom needs model.target=<module.Class>, the dotted path of "
                              "your nn.Module (e.g. model.target=mypkg.models.MyGNN)")
        for key in ("dropout", "input_dropout"):
            require_range(f"model.{key}", getattr(self, key), 0, 1)
        c = self.contract()
        if self.num_layers is not None:
            require_at_least("model.num_layers", self.num_layers, 1)
        if c.layer_wise and self.num_layers not in (None, c.num_layers):
            raise ConfigError(f"model.num_layers={self.num_layers} but {c.name} has "
                              f"{c.num_layers} convs: leave model.num_layers unset (null)")
        if not c.layer_wise and self.num_layers is None:
            raise ConfigError(f"{c.name} is whole-graph-only ({c.why_not_layer_wise}): set "
                              "model.num_layers to the hops its forward reads (one sampler "
                              "fanout each)")
        if c.traced and self.dropout > 0:
            raise ConfigError(f"model.dropout runs after between() of the explicit form; "
                              f"{c.name} is traced and runs its own dropout calls (keyed by "
                              "vertex id): set model.dropout=0")
        if not c.layer_wise and self.dropout > 0:
            raise ConfigError(f"model.dropout runs after between() of a layer-wise model; "
                              f"{c.name} is whole-graph-only: set model.dropout=0 and drop "
                              "in its own forward")

    def settle(self, whole_graph: bool) -> dict[str, tuple[Any, str]]:
        """``num_layers`` null: the module's number of convs."""
        c = self.contract()
        if self.num_layers is None and c.layer_wise:
            return {"num_layers": (c.num_layers, f"{c.name} has {c.num_layers} convs")}
        return {}

    @property
    def residual(self) -> bool:
        """Never gnnscale's residual blocks (the module's between() may add its own)."""
        return False

    @property
    def splittable(self) -> bool:
        """Never: a user's conv is one PyG call, not an aggregate and an update apart."""
        return False

    def why_not_splittable(self) -> str:
        """Always a reason (vertex-cuts and cached aggregates need the split)."""
        return (f"{self.contract().name} (model=custom) runs each conv whole, not as an "
                "aggregate and an update apart, so it cannot run on a vertex-cut: use an "
                f"edge-cut partitioner ({EDGE_CUTS})")

    @property
    def preaggregatable(self) -> bool:
        """Never (no aggregate of its own to apply early)."""
        return False

    @property
    def linear_aggregate(self) -> bool:
        """Never (not split)."""
        return False

    @property
    def batch_norm(self) -> bool:
        """Whether the module holds a norm over the rows a forward holds (batch statistics)."""
        return bool(self.contract().batch_norm)

    @property
    def block_degrees(self) -> bool:
        """Never counted by gnnscale (the module's convs see each block as PyG gives it)."""
        return False

    def why_not_weighted(self) -> str:
        """Always a reason: the block's edge weights are not passed to a user's convs."""
        return (f"{self.contract().name} (model=custom) is not given the edge weights (visit "
                "counts) of sampler=random_walk: use sampler=neighbor")

    def why_not_whole_graph(self) -> str | None:
        """None: a layer-wise module runs on whole-graph layers as on blocks (whether it runs
        layer by layer is :meth:`why_not_layer_by_layer`)."""
        return None

    def why_not_layer_by_layer(self) -> str | None:
        """The contract's reason (not layer-wise, a norm over the rows held, torch dropout
        whose masks ranks cannot agree on), or None."""
        return self.contract().why_not_layer_by_layer

    def widths(self, in_dim: int, out_dim: int) -> list[int]:
        """The module's convs' output widths, with ``in_dim`` and ``out_dim`` at the ends."""
        inner = self.contract().widths[1:-1]
        return [in_dim, *inner, out_dim]

    @property
    def reads_edge_features(self) -> bool:
        """Whether some conv of the module reads edge features (a forward that takes
        ``edge_attr`` and an ``edge_dim`` set, or messages that need it: GINEConv)."""
        return any(self.contract().reads_edges)

    @property
    def edge_width(self) -> int | None:
        """``model.kwargs.edge_dim`` when it is a width."""
        dim = self.kwargs.get("edge_dim")
        return dim if isinstance(dim, int) and not isinstance(dim, bool) else None

    def edge_inputs(self, width: int) -> dict[str, Any]:
        """``model.kwargs.edge_dim=auto`` filled with the dataset's edge feature width."""
        if self.kwargs.get("edge_dim") != "auto":
            return {}
        if width <= 0:
            raise ConfigError("model.kwargs.edge_dim=auto asks for edge features but the "
                              "graph has none: use a dataset with edge features, or drop "
                              "edge_dim")
        return {"kwargs": {**self.kwargs, "edge_dim": int(width)}}

    def graph_inputs(self, graph: Any) -> dict[str, Any]:
        """``model.kwargs.deg=auto`` filled with the training graph's in-degree histogram
        (PyG's ``PNA`` takes it as ``deg``; :func:`gnnscale.models.contract.degree_histogram`)."""
        if self.kwargs.get("deg") != "auto":
            return {}
        from gnnscale.models.contract import degree_histogram

        return {"kwargs": {"deg": degree_histogram(graph)}}


@register("model", "to_hetero")
@dataclass
class ToHeteroConfig(CustomModelConfig):
    """``model=to_hetero``'s options: a user's homogeneous model (``target``, built with
    ``in_channels=hidden``) converted by PyG's ``to_hetero(module, metadata, aggr)`` for a typed
    graph's node and edge types, behind the typed input (``hidden`` wide rows per node type);
    traced into stages, so every strategy runs it (models/to_hetero.py)."""

    title: ClassVar[str] = "model=to_hetero"
    trains_types: ClassVar[bool] = True
    _target_: str = "gnnscale.models.to_hetero.ToHetero"
    hidden: int = 64  # the typed input's width: the user's module gets in_channels=hidden
    aggr: str = "sum"  # to_hetero's aggr: how the edge types into a node type combine
    input_features: str = "all"  # all | target | none: whose features the typed input reads

    def check(self) -> None:
        """The custom model's checks, a known aggr and typed input, and a forward gnnscale
        can stage (a whole-graph-only one is refused, naming what runs it)."""
        require_one_of("model.aggr", self.aggr, ("sum", "mean", "max", "min"))
        require_one_of("model.input_features", self.input_features, INPUT_FEATURES)
        require_at_least("model.hidden", self.hidden, 1)
        if self.dropout:
            raise ConfigError("model.dropout: a model converted by to_hetero runs its own "
                              "dropout calls (keyed by vertex id): set model.dropout=0")
        super().check()
        from gnnscale.models.contract import check_target

        why = check_target(self.target, dict(self.kwargs), self.hidden)
        if why is not None:
            raise ConfigError(why)

    def widths(self, in_dim: int, out_dim: int) -> list[int]:
        """The typed input's rows (``hidden`` wide), each stage's shipped rows, the output."""
        inner = self.contract().widths[1:-1]
        return [self.hidden, *inner, out_dim]

    def why_not_splittable(self) -> str:
        """Always a reason (vertex-cuts and cached aggregates need the split)."""
        return (f"{self.contract().name} (model=to_hetero) runs one conv per edge type, not an "
                "aggregate and an update apart, so it cannot run on a vertex-cut: use an "
                f"edge-cut partitioner ({EDGE_CUTS})")


#: Which node types' features a typed input reads (models/typed_input.py input_dims)
INPUT_FEATURES = ("all", "target", "none")
#: R-GCN's aggregations over each relation's edges
RGCN_AGGRS = ("mean", "add")
#: How R-GCN reads featureless node types: learned embedding rows, or one-hot ids
RGCN_FEATURELESS = ("embedding", "onehot")


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
    #: embedding: a featureless type's rows are learned embedding rows (sparse tables);
    #: onehot: layer 0 reads one-hot vertex ids (the paper's featureless input: each
    #: relation's layer-0 weight has a row per vertex); needs every node type featureless
    featureless: str = "embedding"
    input_features: str = "all"  # all | target | none: whose features the typed input reads
    root_weight: bool = True  # false: no root weight (a vertex reads only its neighbours)

    def check(self) -> None:
        """The shared checks, bases >= 0, a known aggregation and featureless input, no
        residual blocks, no input dropout on one-hot ids, no update-before-aggregate."""
        super().check()
        require_one_of("model.input_features", self.input_features, INPUT_FEATURES)
        require_at_least("model.num_bases", self.num_bases, 0)
        require_one_of("model.aggr", self.aggr, RGCN_AGGRS)
        require_one_of("model.featureless", self.featureless, RGCN_FEATURELESS)
        if self.featureless == "onehot" and self.input_dropout:
            raise ConfigError("model.featureless=onehot reads vertex ids, which input dropout "
                              "cannot drop: set model.input_dropout=0")
        if self.residual:
            raise ConfigError("model=rgcn has no residual blocks yet: set model.residual=false")
        if str(self.reorder_update).lower() == "true":
            raise ConfigError("model=rgcn weighs each relation's sum by its own weight, so no "
                              "one linear moves before the aggregation: set "
                              "model.reorder_update=auto or false")

    @property
    def splittable(self) -> bool:
        """True with ``featureless=embedding``: the aggregate keeps one sum per relation side
        by side (``R * in`` wide), the update applies the stacked relation weights. One-hot
        input is not split (layer 0's aggregate of one-hot rows would be ``R * vertices``
        wide)."""
        return self.featureless != "onehot"

    def why_not_splittable(self) -> str | None:
        """None with ``featureless=embedding``, else the reason."""
        if self.splittable:
            return None
        return ("R-GCN with model.featureless=onehot reads vertex ids into layer 0 (a weight row "
                "per vertex and relation), which aggregate and update do not split: use "
                "model.featureless=embedding, or an edge-cut partitioner "
                f"({EDGE_CUTS})")

    def why_not_weighted(self) -> str:
        """Always a reason: R-GCN weighs each relation, not each edge."""
        return ("R-GCN aggregates each relation's edges alike and cannot use the visit counts "
                "sampler=random_walk gives as edge weights: use sampler=neighbor")

    def widths(self, in_dim: int, out_dim: int) -> list[int]:
        """The typed input's rows (``hidden`` wide, whatever the feature widths), then each
        layer's output."""
        return [self.hidden] * self.num_layers + [out_dim]


#: R-GAT's attention: a softmax over all of a destination's in-edges, or per relation
RGAT_ATTENTION = ("across-relation", "within-relation")


@register("model", "rgat")
@dataclass
class RGATConfig(ModelConfig):
    """``model=rgat``'s options: R-GAT (Busbridge et al.; PyG's ``RGATConv``) on typed graphs,
    one weight per relation (``num_bases`` > 0: combinations of that many bases) and attention
    over the relations' messages, reading edge features with ``edge_dim``."""

    title: ClassVar[str] = "R-GAT"
    trains_types: ClassVar[bool] = True
    _target_: str = "gnnscale.models.rgat.RGAT"
    heads: int = 4
    out_heads: int = 1
    num_bases: int = 0  # 0: a full weight per relation; else the basis decomposition
    #: across-relation: a softmax over all of a destination's in-edges; within-relation: one
    #: per relation
    attention: str = "across-relation"
    attn_dropout: float = 0.0
    #: edge features each attention score reads (RGATConv's ``edge_dim``): null (none), auto
    #: (the dataset's width) or a width
    edge_dim: Any = None

    def check(self) -> None:
        """The shared checks, heads that divide ``hidden``, bases >= 0, a known attention, an
        edge_dim, no residual blocks and no update-before-aggregate."""
        super().check()
        check_edge_dim(self.edge_dim)
        require_at_least("model.num_bases", self.num_bases, 0)
        require_at_least("model.out_heads", self.out_heads, 1)
        require_one_of("model.attention", self.attention, RGAT_ATTENTION)
        require_range("model.attn_dropout", self.attn_dropout, 0, 1)
        if self.heads < 1 or self.hidden % self.heads:
            raise ConfigError(f"model.hidden ({self.hidden}) must be a multiple of "
                              f"model.heads ({self.heads})")
        if self.residual:
            raise ConfigError("model=rgat has no residual blocks yet: set model.residual=false")

    def why_not_layer_by_layer(self) -> str | None:
        """Attention dropout: its masks are torch's (:func:`why_not_keyed_attention`)."""
        return why_not_keyed_attention(self.attn_dropout)

    @property
    def splittable(self) -> bool:
        """Never: attention weighs each edge by a softmax over the destination's in-edges."""
        return False

    def why_not_splittable(self) -> str:
        """Always a reason: the attention softmax spans a vertex's in-edges."""
        return ("R-GAT cannot be split into aggregate and update (its attention softmax spans a "
                "vertex's in-edges), so it cannot run on a vertex-cut: use an edge-cut "
                f"partitioner ({EDGE_CUTS}), or strategy=data or factored")

    def why_not_weighted(self) -> str:
        """Always a reason: attention learns its own edge weights."""
        return ("R-GAT learns its own edge weights (attention) and cannot use the visit counts "
                "sampler=random_walk gives as edge weights: use sampler=neighbor")

    def widths(self, in_dim: int, out_dim: int) -> list[int]:
        """The typed input's rows (``hidden`` wide), then each layer's output."""
        return [self.hidden] * self.num_layers + [out_dim]


@register("model", "simplehgn")
@dataclass
class SimpleHGNConfig(ModelConfig):
    """``model=simplehgn``'s options: Simple-HGN (Lv et al., the HGB paper) on typed graphs,
    HGB's defaults: ``hidden`` channels per head (64), 8 heads, 3 layers, an edge-type
    embedding of 64 in every attention score, LeakyReLU slope 0.05, dropout 0.5 on every
    layer's input and on the attention, ELU, node residuals."""

    title: ClassVar[str] = "Simple-HGN"
    trains_types: ClassVar[bool] = True
    _target_: str = "gnnscale.models.simplehgn.SimpleHGN"
    hidden: int = 64  # channels per head (and the typed input's width)
    heads: int = 8
    edge_emb: int = 64  # width of each relation's learned embedding
    negative_slope: float = 0.05
    attn_dropout: float = 0.5
    node_residual: bool = True  # a linear residual of the destination's row, layers >= 1
    input_features: str = "all"  # all | target | none: whose features the input reads
    dropout: float = 0.5
    input_dropout: float = 0.5
    activation: str = "elu"

    def check(self) -> None:
        """The shared checks, sizes >= 1, a slope >= 0, known input features, no norm or
        residual blocks (the model has its own residuals)."""
        super().check()
        require_at_least("model.heads", self.heads, 1)
        require_at_least("model.edge_emb", self.edge_emb, 1)
        require_at_least("model.negative_slope", self.negative_slope, 0)
        require_range("model.attn_dropout", self.attn_dropout, 0, 1)
        require_one_of("model.input_features", self.input_features, INPUT_FEATURES)
        if self.residual:
            raise ConfigError("model=simplehgn has its own node residuals "
                              "(model.node_residual): set model.residual=false")
        if self.norm != "none":
            raise ConfigError("model=simplehgn normalises nothing between layers (its output "
                              "is L2-normalised): set model.norm=none")

    @property
    def splittable(self) -> bool:
        """Never: the attention softmax spans all of a destination's in-edges."""
        return False

    def why_not_splittable(self) -> str:
        """Always a reason."""
        return ("Simple-HGN cannot be split into aggregate and update (its attention softmax "
                "spans all of a vertex's in-edges): train it with strategy=data or factored")

    def why_not_weighted(self) -> str:
        """Always a reason: attention learns its own edge weights."""
        return ("Simple-HGN learns its own edge weights (attention) and cannot use the visit "
                "counts sampler=random_walk gives as edge weights: use sampler=neighbor or full")

    def widths(self, in_dim: int, out_dim: int) -> list[int]:
        """The typed input's rows (``hidden``), ``hidden * heads`` between layers, then the
        classes."""
        return [self.hidden] + [self.hidden * self.heads] * (self.num_layers - 1) + [out_dim]


@dataclass
class TypedConvConfig(ModelConfig):
    """Shared by the typed models on PyG's heterogeneous convs (``hsage``, ``hgat``, ``hgt``,
    models/hetero.py): they train typed graphs, are not split, and weigh no edges."""

    trains_types: ClassVar[bool] = True
    #: its ``model=<name>``
    option: ClassVar[str] = ""

    def check(self) -> None:
        """The shared checks and no residual blocks."""
        super().check()
        if self.residual:
            raise ConfigError(f"model={self.option} has no residual blocks: set "
                              "model.residual=false")

    @property
    def splittable(self) -> bool:
        """Never: a layer sums one conv per edge type, which aggregate/update do not express."""
        return False

    def why_not_splittable(self) -> str:
        """Always a reason."""
        return (f"{self.title} is not split into aggregate and update (a layer runs one conv "
                "per edge type), so it cannot run on a vertex-cut: use an edge-cut partitioner "
                f"({EDGE_CUTS})")

    def why_not_weighted(self) -> str:
        """Always a reason: its convs take no per-edge weights."""
        return (f"{self.title} cannot use the visit counts sampler=random_walk gives as edge "
                "weights: use sampler=neighbor")

    def widths(self, in_dim: int, out_dim: int) -> list[int]:
        """The typed input's rows (``hidden`` wide, whatever the feature widths), then each
        layer's output."""
        return [self.hidden] * self.num_layers + [out_dim]


def _check_heads(hidden: int, heads: int) -> None:
    if heads < 1 or hidden % heads:
        raise ConfigError(f"model.hidden ({hidden}) must be a multiple of model.heads ({heads})")


@register("model", "hsage")
@dataclass
class HSAGEConfig(TypedConvConfig):
    """``model=hsage``'s options: GraphSAGE per edge type, summed (PyG's ``to_hetero``)."""

    title: ClassVar[str] = "typed SAGE"
    option: ClassVar[str] = "hsage"
    _target_: str = "gnnscale.models.hsage.HSAGE"
    aggr: str = "mean"  # each edge type's SAGEConv aggregation

    def check(self) -> None:
        """The typed checks and a known aggregation."""
        super().check()
        require_one_of("model.aggr", self.aggr, ("mean", "sum", "max"))


@register("model", "hgat")
@dataclass
class HGATConfig(TypedConvConfig):
    """``model=hgat``'s options: GAT per edge type, summed (PyG's ``to_hetero``), with a skip
    linear per node type."""

    title: ClassVar[str] = "typed GAT"
    option: ClassVar[str] = "hgat"
    _target_: str = "gnnscale.models.hgat.HGAT"
    heads: int = 4
    out_heads: int = 1
    attn_dropout: float = 0.0
    skip: bool = True  # a linear of each destination's own row per node type

    def check(self) -> None:
        """The typed checks, hidden channels that the heads divide."""
        super().check()
        _check_heads(self.hidden, self.heads)
        require_at_least("model.out_heads", self.out_heads, 1)
        require_range("model.attn_dropout", self.attn_dropout, 0, 1)

    def why_not_layer_by_layer(self) -> str | None:
        """Attention dropout: its masks are torch's (:func:`why_not_keyed_attention`)."""
        return why_not_keyed_attention(self.attn_dropout)


@register("model", "hgt")
@dataclass
class HGTConfig(TypedConvConfig):
    """``model=hgt``'s options: HGT (Hu et al., 2020) from PyG's HGTConv."""

    title: ClassVar[str] = "HGT"
    option: ClassVar[str] = "hgt"
    _target_: str = "gnnscale.models.hgt.HGT"
    heads: int = 4

    def check(self) -> None:
        """The typed checks, hidden channels that the heads divide."""
        super().check()
        _check_heads(self.hidden, self.heads)
