"""What a strategy declares and refuses, torch-free: the base of every strategy's schema.

Each strategy's ``strategies/<name>/config.py`` holds its typed schema, a subclass of
:class:`StrategyConfig`. Besides the options (dataclass fields), the class declares what the
strategy is (:attr:`~StrategyConfig.samples`, :attr:`~StrategyConfig.deps`, the defaults
``auto`` composes it with, how each metric it reports reduces over ranks, ...) and checks a
config against it, all without torch: the launcher (``runner/validate.py``), the runner and
``strategy=auto`` read it before anything heavy is imported. The strategy class
(``strategies/base.py``) takes its declarations from here (``Strategy.schema``), so there is
one source.

The launcher runs the checks in order:

1. :meth:`~gnnscale.schema.Options.check` on the strategy's own options;
2. :meth:`StrategyConfig.check_config`: against the rest of the config (model, deps,
   sampler, partitioner, ranks), before the dataset is read;
3. :meth:`StrategyConfig.check_data`: against the dataset's metadata (``meta.json``); the
   task's own checks (``TaskConfig.check_data``: what it needs of the dataset, a training item
   per rank when the strategy declares :attr:`~StrategyConfig.items_per_rank`) run here;
4. only when :meth:`StrategyConfig.checks_built` says so: the strategy class's
   ``check_built`` on the loaded graph and built components (imports torch).

A check raises :class:`~gnnscale.errors.ConfigError` naming the key to change.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from omegaconf import OmegaConf, open_dict

from gnnscale import registry
from gnnscale.data.metadata import DatasetMeta
from gnnscale.errors import ConfigError
from gnnscale.sampling.schemas import fanout_layers, fanout_table, is_typed
from gnnscale.schema import Options, Reduce, declared_along
from gnnscale.tasks.config import declared_task

#: The declarations a strategy class takes from its schema.
DECLARATIONS = ("name", "samples", "layer_by_layer", "takes_weighted_blocks",
                "takes_edge_features", "reads", "deps", "default_deps",
                "default_cache", "default_epochs", "auto_candidate", "meta", "items_per_rank",
                "reductions", "columns", "trains_types", "exchange_keys", "from_parts")


@dataclass
class Checked:
    """What the launcher's strategy checks read, torch-free: the dataset's metadata (None
    before the dataset is read), and the model's and the deps manager's schemas (which say
    what the model can do and what the manager replicates). ``loaded``: the graph itself when
    one was loaded (for :meth:`StrategyConfig.checks_built`)."""

    graph: DatasetMeta | None
    model: Any
    deps: Any
    loaded: Any = None

    @classmethod
    def build(cls, cfg: Any, graph: Any = None) -> Checked:
        """The facts of ``cfg``; ``graph``: its dataset's :class:`DatasetMeta`, or a loaded
        graph (its metadata is taken), or None before the dataset is read."""
        meta = graph if graph is None or isinstance(graph, DatasetMeta) else \
            DatasetMeta.of(graph)
        return cls(graph=meta, model=registry.options("model", cfg.get("model")),
                   deps=registry.options("deps", cfg.get("deps")),
                   loaded=None if isinstance(graph, DatasetMeta) else graph)


@dataclass
class StrategyConfig(Options):
    """Base of a strategy's schema: its declarations (class attributes) and launcher checks
    (class methods). Fields are the strategy's options."""

    #: The option name (``strategy=<name>``), for messages and ``auto``'s table.
    name: ClassVar[str] = ""
    #: Whether it draws mini-batches with ``sampler`` (its fanouts are checked); False: it
    #: trains on the whole graph (the model's ``auto`` options are settled for that).
    samples: ClassVar[bool] = True
    #: Whether it computes a layer's rows apart (on several ranks, or in chunks) and runs the
    #: model one conv at a time: the model's schema must allow it
    #: (``why_not_layer_by_layer``; a user's whole-graph-only model does not).
    layer_by_layer: ClassVar[bool] = False
    #: Whether it trains on blocks that carry ``edge_weight`` (``sampler=random_walk``).
    takes_weighted_blocks: ClassVar[bool] = True
    #: Whether it gathers edge features for a model that reads them (``model.edge_dim``,
    #: ``model=gine``, a user's conv with ``edge_dim``): every built-in strategy does.
    takes_edge_features: ClassVar[bool] = False
    #: The component config groups whose settings it uses (the others are composed but
    #: ignored; ``scripts/compare.py`` leaves them out of its run labels).
    reads: ClassVar[tuple[str, ...]] = ("sampler", "cache", "deps", "partition")
    #: The dependency managers it runs with: ``replicate`` (every dependency replicated:
    #: deps=depcache), ``communicate`` (deps that communicate: depcomm, hybrid) or ``any``.
    deps: ClassVar[str] = "any"
    #: Its deps and cache options when the user set none (the papers' settings; ``auto``
    #: composes each candidate with them).
    default_deps: ClassVar[str] = "depcache"
    default_cache: ClassVar[str] = "none"
    #: Its ``epochs`` when the user set none (``${gnnscale.default_epochs:}``, the root's
    #: default): enough for its default run to reach its accuracy on the default dataset. A
    #: mini-batch strategy takes many optimizer steps per epoch; a full-graph one takes one.
    default_epochs: ClassVar[int] = 3
    #: Whether it trains typed graphs (several node or edge types) with their types; a
    #: strategy that does not is refused a typed dataset at launch rather than ignoring types.
    trains_types: ClassVar[bool] = False
    #: Its per-epoch byte counters that count hidden rows (a layer's activations, and their
    #: gradients) sent between ranks: ``split``'s shuffle, ``fullgraph``'s and ``offload``'s
    #: exchanges; none for a strategy that exchanges no hidden rows (``data``, ``factored``).
    #: The comparison tool reads them (``gnnscale/compare/table.py``, its typed bytes table).
    exchange_keys: ClassVar[tuple[str, ...]] = ()
    #: Whether it trains from a partitioned layout (``parts=``: each rank reads its own part
    #: and what the part holds of the rest, not the whole processed dataset); what it needs of
    #: the layout and the other options :meth:`parts_problem` says.
    from_parts: ClassVar[bool] = False
    #: Whether ``strategy=auto`` may profile it.
    auto_candidate: ClassVar[bool] = True
    #: Whether its ranks run faster bound to cores (``dist.bind_cores``; docs/distributed.md):
    #: ranks that meet in lockstep collectives do; False keeps the ranks unbound.
    binds_cores: ClassVar[bool] = True
    #: A meta strategy is resolved in the launcher into runs of concrete ones (``auto``).
    meta: ClassVar[bool] = False
    #: Whether every rank trains a share of each step's training items of its own (so the
    #: task's training set needs an item per rank); False: one step over the whole graph.
    items_per_rank: ClassVar[bool] = False
    #: How each per-epoch figure it reports combines over the reporting ranks (``max``: the
    #: slowest rank's, ``mean``, ``sum``); a subclass adds to its bases' (see
    #: :meth:`metric_reductions`). An undeclared figure is a count or bytes (summed) or, when
    #: its name ends in ``_time``, a per-rank phase (averaged): ``runner/metrics.py``.
    reductions: ClassVar[Mapping[str, Reduce]] = {
        "train_loss": Reduce.mean,  # the mean over the global batch, on every rank
        "epoch_time": Reduce.max,  # the slowest rank's wall time
        "sample_time": Reduce.mean, "load_time": Reduce.mean, "compute_time": Reduce.mean,
        "comm_time": Reduce.mean,
    }
    #: Its columns of the run's summary table (after the task's), added to its bases'.
    columns: ClassVar[tuple[str, ...]] = (
        "epoch_time", "sample_time", "load_time", "compute_time", "comm_time", "cache_hit_rate",
        "bytes_host_to_rank", "bytes_rank_to_rank")
    _target_: str = ""

    @classmethod
    def metric_reductions(cls) -> dict[str, Reduce]:
        """Its :attr:`reductions` merged with its bases'."""
        return declared_along(cls, "reductions")

    @classmethod
    def summary_columns(cls) -> tuple[str, ...]:
        """Its :attr:`columns` merged with its bases', in order."""
        return tuple(declared_along(cls, "columns"))

    @classmethod
    def preferred(cls, cfg: Any) -> dict[str, str]:
        """The deps and cache options it runs with on ``cfg`` when the user set none."""
        return {"deps": cls.default_deps, "cache": cls.default_cache}

    @classmethod
    def model_defaults(cls, cfg: Any, model: Any) -> dict[str, tuple[Any, str]]:
        """The model options left to the run (``auto``) and the value each takes under this
        strategy, with why (``model``: the model's schema, asked whether the strategy trains
        on the whole graph): ``{key: (value, reason)}``, set by the launcher."""
        settle = getattr(model, "settle", None)
        return settle(whole_graph=not cls.samples) if settle is not None else {}

    @classmethod
    def why_not_candidate(cls, cfg: Any) -> str | None:
        """Why ``strategy=auto`` should not profile it on ``cfg`` (None: it may)."""
        return None if cls.auto_candidate else f"strategy={cls.name} is not an auto candidate"

    @classmethod
    def check_config(cls, cfg: Any, built: Checked) -> None:
        """Refuse what the config alone rules out: a model it cannot run layer by layer (when
        it does), fanouts vs layers and weighted blocks (when it samples), the deps manager it
        runs with."""
        if cls.layer_by_layer:
            check_layer_by_layer(cls, built.model)
        if cls.samples:
            check_fanouts(cfg)
            check_weighted_blocks(cfg, cls, built.model)
        check_edge_features(cfg, cls, built.model, built.graph)
        check_deps(cls, built.deps)

    @classmethod
    def check_data(cls, cfg: Any, built: Checked) -> None:
        """Refuse a dataset it cannot train on (``built.graph`` is its metadata): typed fanouts
        against its edge types (when it samples), a typed graph unless it trains types, the
        task's checks (what it needs, a training item per rank when
        :attr:`items_per_rank`)."""
        graph = built.graph
        if cls.samples and graph is not None:
            check_fanouts(cfg, graph)
        check_edge_features(cfg, cls, built.model, graph)
        if graph is not None and graph.is_typed and not cls.trains_types:
            raise ConfigError(f"dataset {graph.name} is a typed graph ({len(graph.node_types)} "
                              f"node types, {len(graph.edge_types)} edge types): "
                              f"strategy={cls.name} does not train typed graphs yet (it would "
                              f"ignore the types): train it with {strategies_that('trains_types')}"
                              " and a typed model (model=rgcn; docs/typed-graphs.md)")
        model = built.model
        if graph is not None and model is not None and \
                graph.is_typed != bool(getattr(model, "trains_types", False)):
            title = getattr(model, "title", "the model")
            if graph.is_typed:
                raise ConfigError(f"dataset {graph.name} is a typed graph: {title} would ignore "
                                  "its types; use a typed model (model=rgcn, "
                                  "docs/typed-graphs.md)")
            raise ConfigError(f"{title} trains typed graphs (several node or edge types), and "
                              f"dataset {graph.name} has one of each: use model=sage, gcn, gin "
                              "or gat")
        ranks = cfg.dist.world_size if cls.items_per_rank else 1
        declared_task(cfg).check_data(cfg, graph, ranks)

    @classmethod
    def parts_problem(cls, cfg: Any, built: Checked) -> str | None:
        """Why it cannot train ``cfg`` from ``cfg.parts`` (None: it can, as far as the strategy
        goes): it does not declare :attr:`from_parts`, or it samples (reads the whole
        topology) and the layout is a vertex-cut's."""
        if not cls.from_parts:
            return (f"strategy={cls.name} reads the whole graph on every rank, so it cannot "
                    f"train from parts= yet: use {strategies_that('from_parts')}, or drop "
                    "parts= and give every host the whole processed dataset")
        if cls.samples and partition_kind(cfg) != "edge_cut":
            return (f"strategy={cls.name} samples from the whole topology, which a vertex-cut "
                    "layout does not hold: partition with an edge-cut partitioner (e.g. "
                    "partitioner=metis) for parts=")
        return None

    @classmethod
    def checks_built(cls, cfg: Any) -> bool:
        """Whether ``cfg`` needs the strategy class's ``check_built`` (on the loaded graph and
        built components, in the launcher: imports torch); default never."""
        return False


class SamplingConfig(StrategyConfig):
    """Base of the schemas of strategies that train on global mini-batches of
    ``strategy.batch_size`` training items (``SamplingStrategy``), a share of each on every
    rank."""

    items_per_rank: ClassVar[bool] = True

    def check(self) -> None:
        """Batch size >= 1, prefetch depth and sampler processes >= 0 (those it has)."""
        for key, low in (("batch_size", 1), ("prefetch", 0), ("sample_workers", 0)):
            value = getattr(self, key, None)
            if value is not None and value < low:
                raise ConfigError(f"strategy.{key} must be >= {low}, got {value}")

    @classmethod
    def check_config(cls, cfg: Any, built: Checked) -> None:
        """The shared checks, a sampler, and a batch every rank can share."""
        super().check_config(cfg, built)
        if cfg.get("sampler") is None:
            raise ConfigError(f"strategy={cls.name} samples mini-batches: give a sampler "
                              "(e.g. sampler=neighbor)")
        world, batch = cfg.dist.world_size, cfg.strategy.batch_size
        if batch < world:
            raise ConfigError(f"strategy.batch_size={batch} is smaller than dist.world_size="
                              f"{world}: every rank needs at least one target per step")


def check_deps(strategy: Any, deps: Any) -> None:
    """The dependency manager must be one the strategy runs with (``deps``: its schema, or a
    built manager; ``strategy``: its declarations)."""
    if deps is None:
        return
    if strategy.deps == "replicate" and not deps.replicates_all:
        raise ConfigError(f"strategy={strategy.name} replicates every dependency: use "
                          "deps=depcache")
    if strategy.deps == "communicate" and deps.replicates_all:
        raise ConfigError(f"strategy={strategy.name} communicates dependencies: use "
                          "deps=depcomm or deps=hybrid")


def check_layer_by_layer(strategy: Any, model: Any) -> None:
    """A strategy that computes a layer's rows apart needs a model that runs one conv at a
    time with vertex-wise steps between (``model``: its schema)."""
    why = getattr(model, "why_not_layer_by_layer", lambda: None)() if model is not None \
        else None
    if why is not None:
        raise ConfigError(f"strategy={strategy.name} runs the model one conv at a time on parts "
                          f"of each layer, but {why}: use strategy=data or strategy=factored")


#: ``sampler=neighbor``'s default fanouts (configs/sampler/neighbor.yaml), which the launcher
#: sizes to the model's number of layers when the user left them (:func:`size_default_fanouts`)
DEFAULT_FANOUTS = (15, 10, 5)


def _set_by_user(key: str) -> bool:
    """Whether the command line of the Hydra run set ``key`` (False outside a Hydra run)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return False
        task = HydraConfig.get().overrides.task
    except Exception:  # noqa: BLE001 - no Hydra run: judge by the value alone
        return False
    return any(o.split("=", 1)[0].lstrip("+~") == key for o in task)


def size_default_fanouts(cfg: Any) -> dict[str, Any]:
    """The default ``sampler.fanouts`` (``[15, 10, 5]``, left unset) sized to
    ``model.num_layers`` (its first entries, the last repeated), said in one line, so a
    2-layer model runs with nothing else set (:func:`check_fanouts` calls it first); fanouts
    the user gave are kept (and checked). Returns ``{"sampler.fanouts": value}`` when it sized
    them."""
    sampler = cfg.get("sampler")
    model = cfg.get("model")
    fanouts = sampler.get("fanouts") if sampler is not None else None
    layers = model.get("num_layers") if model is not None else None
    if not isinstance(layers, int) or layers < 1 or fanouts is None or \
            isinstance(fanouts, Mapping) or len(fanouts) == layers:
        return {}
    if tuple(fanouts) != DEFAULT_FANOUTS or _set_by_user("sampler.fanouts"):
        return {}
    from omegaconf import open_dict

    sized = [*DEFAULT_FANOUTS[:layers], *[DEFAULT_FANOUTS[-1]] * (layers - 3)]
    with open_dict(cfg):
        sampler.fanouts = sized
    print(f"note: sampler.fanouts={sized} (the default [15, 10, 5] sized to "
          f"model.num_layers={layers}; set sampler.fanouts to choose)", flush=True)
    return {"sampler.fanouts": sized}


def check_fanouts(cfg: Any, graph: DatasetMeta | None = None) -> None:
    """The sampler must draw one hop per model layer, with valid fanouts: a number positive
    or -1, a per-edge-type dict (``sampling/schemas.py``) drawing some type. With the
    dataset's metadata ``graph``, every dict must name each of its edge types, and only
    those."""
    sampler = cfg.get("sampler")
    if sampler is None:
        return
    size_default_fanouts(cfg)
    fanouts = sampler.get("fanouts")
    layers = cfg.model.num_layers
    if fanouts is not None:
        table = fanout_layers(fanouts)
        shown = "[" + ", ".join(str(f) if isinstance(f, int) else "{" + ", ".join(
            f"{k}: {v}" for k, v in f.items()) + "}" for f in table) + "]"
        if len(table) != layers:
            raise ConfigError(
                f"sampler.fanouts has {len(table)} entries ({shown}) but "
                f"model.num_layers={layers}: give one fanout per layer, e.g. "
                f"sampler.fanouts=[{','.join(['10'] * layers)}]"
            )
        if any(f == 0 if isinstance(f, int) else all(v == 0 for v in f.values())
               for f in table):
            raise ConfigError(f"sampler.fanouts entries must be positive or -1 (all), and a "
                              f"per-edge-type dict must draw some type, got {shown}")
        if graph is not None and is_typed(fanouts):
            fanout_table(fanouts, graph.edge_types, f"dataset {graph.name}")
    sampled = sampler.get("num_layers")
    if fanouts is None and sampled is not None and sampled != layers:
        raise ConfigError(f"sampler.num_layers={sampled} but model.num_layers={layers}: "
                          "they must be equal")


def check_weighted_blocks(cfg: Any, strategy: Any, model: Any) -> None:
    """A sampler whose blocks carry edge weights needs a strategy and a model that use them
    (``model``: the model's schema)."""
    sampler = registry.options("sampler", cfg.get("sampler")) if cfg.get("sampler") else None
    if sampler is None or not getattr(sampler, "weighted_blocks", False):
        return
    if not strategy.takes_weighted_blocks:
        raise ConfigError(f"strategy={strategy.name} cannot carry the edge weights (visit "
                          f"counts) of {type(sampler).__name__.removesuffix('Config')}: use "
                          "strategy=data or strategy=factored, or sampler=neighbor")
    why = model.why_not_weighted() if model is not None else None
    if why is not None:
        raise ConfigError(why)


def check_edge_features(cfg: Any, strategy: Any, model: Any,
                        graph: DatasetMeta | None = None) -> None:
    """A model that reads edge features needs a strategy that gathers them, a sampler of graph
    edges and (with the dataset's metadata ``graph``) a graph whose edges all have features
    of one width, the one the model was given."""
    if model is None or not getattr(model, "reads_edge_features", False):
        return
    title = getattr(model, "title", "the model")
    if not strategy.takes_edge_features:
        raise ConfigError(f"{title} reads edge features, which strategy={strategy.name} does "
                          f"not gather yet: use {strategies_that('takes_edge_features')}")
    sampler = registry.options("sampler", cfg.get("sampler")) if cfg.get("sampler") else None
    if sampler is not None and getattr(sampler, "weighted_blocks", False):
        raise ConfigError(f"{title} reads edge features, and the edges of "
                          f"{type(sampler).__name__.removesuffix('Config')} are not graph "
                          "edges: use sampler=neighbor or full")
    if graph is None:
        return
    dims = set(graph.edge_feature_dims)
    if not dims or dims == {0}:
        raise ConfigError(f"{title} reads edge features but dataset {graph.name} has none: use "
                          "a dataset with edge features, or a model without edge_dim")
    if len(dims) > 1:
        raise ConfigError(f"{title} reads edge features, and dataset {graph.name}'s edge types "
                          f"have features of different widths ({graph.edge_feature_dims}): no "
                          "model reads those yet")
    width = getattr(model, "edge_width", None)
    if width is not None and width != next(iter(dims)):
        raise ConfigError(f"{title} was given edge_dim={width}, but dataset {graph.name}'s "
                          f"edge features are {next(iter(dims))} wide: set edge_dim=auto")


def strategies_that(declaration: str) -> str:
    """``strategy=a, strategy=b or strategy=c``: the registered strategies whose schema
    declares ``declaration`` (e.g. ``trains_types``), by name (not by import order), for a
    refusal naming what runs instead."""
    names = [f"strategy={name}" for name, cls in sorted(registry.schemas("strategy").items())
             if getattr(cls, declaration, False) and not getattr(cls, "meta", False)]
    return " or ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else \
        "".join(names) or "no strategy"


def partition_kind(cfg: Any) -> str:
    """``edge_cut`` or ``vertex_cut``: what ``cfg.partitioner`` produces (its schema says)."""
    schema = registry.schema_of("partitioner", cfg.partitioner)
    return getattr(schema, "kind", "edge_cut")


def settle_model_options(cfg: Any, decl: type[StrategyConfig] | None = None
                         ) -> dict[str, tuple[Any, str]]:
    """Set the model options ``cfg`` leaves to the run (``auto``, e.g. ``model.gcn_norm``) to
    what its strategy asks of the model's schema (:meth:`StrategyConfig.model_defaults`); a
    value the user set is kept. A meta strategy (``auto``) settles nothing: each of its
    candidates settles its own. Returns ``{key: (value, why)}``. The one rule the launcher
    (which says it) and auto's candidates (each settled silently) both apply."""
    node = cfg.get("model")
    decl = decl or declared(cfg.strategy)
    schema = registry.options("model", node) if node is not None else None
    if schema is None or decl.meta:
        return {}
    chosen = decl.model_defaults(cfg, schema)
    if chosen:
        with open_dict(cfg):
            for key, (value, _) in chosen.items():
                node[key] = value
    return chosen


def declared(node: Any) -> type[StrategyConfig]:
    """The declarations of the strategy option ``node`` (``cfg.strategy``), torch-free where
    they are: its registered schema; else a :class:`StrategyConfig` subclass with the same
    ``_target_`` in the ``config`` module beside the class's module (the layout of
    ``strategies/<name>/``); else the class itself is imported and its ``schema`` read."""
    schema = registry.schema_of("strategy", node)
    if isinstance(schema, type) and issubclass(schema, StrategyConfig):
        return schema
    target = str(node.get("_target_") or "")
    module = target.rpartition(".")[0]
    package = module.rpartition(".")[0]
    if package:
        try:
            found = importlib.util.find_spec(f"{package}.config")
        except (ImportError, ValueError):
            found = None
        if found is not None:
            config = importlib.import_module(f"{package}.config")
            for obj in vars(config).values():
                if (isinstance(obj, type) and issubclass(obj, StrategyConfig)
                        and getattr(obj, "_target_", None) == target):
                    return obj
    from hydra.utils import get_object

    return get_object(target).schema


def default_epochs(*, _root_: Any) -> int:
    """``epochs`` left to the strategy: its declared ``default_epochs`` (the resolver
    ``${gnnscale.default_epochs:}``, the root schema's default; registered here, beside the
    declarations it reads, so the root schema imports no strategy)."""
    return int(declared(_root_.strategy).default_epochs)


OmegaConf.register_new_resolver("gnnscale.default_epochs", default_epochs, replace=True)


def epochs_left(cfg: Any) -> bool:
    """Whether ``cfg``'s ``epochs`` is left to its strategy (``${gnnscale.default_epochs:}``,
    the root's default) rather than set."""
    node = cfg._get_node("epochs") if OmegaConf.is_interpolation(cfg, "epochs") else None
    return node is not None and "gnnscale.default_epochs" in str(node._value())
