"""Strategy base: who computes what, in which order. One class per strategy, same few methods.

A strategy declares itself (:attr:`Strategy.samples`, :attr:`deps`, :attr:`default_deps`,
:attr:`default_cache`, :attr:`auto_candidate`, ...) and checks a config in its torch-free
schema, ``strategies/<name>/config.py`` (a :class:`~gnnscale.strategies.config.StrategyConfig`
named by :attr:`Strategy.schema`): the launcher reads and runs them there before anything heavy
is imported, and the class takes its declarations from it. The runner
(:mod:`gnnscale.runner.worker`) knows only this contract:

- the schema's checks (in the launching process before any rank starts): refuse a config
  this strategy cannot run, with the key to change; :meth:`Strategy.check` runs them all,
  :meth:`Strategy.check_built` is the one that may need the loaded graph (when the schema's
  ``checks_built`` says so);
- :meth:`setup`, then per epoch :meth:`train_epoch` (returns this rank's metrics) and, when an
  evaluation is due, :meth:`evaluate`; :meth:`num_steps` sizes the progress bar (None: none);
- :attr:`group` is the process group of the ranks that report: the runner reduces metrics,
  gathers RNG states, evaluates and barriers on it, and only on the ranks where
  :attr:`reports` is True (a rank that only samples reports nothing); the group's rank 0 leads
  (writes metrics, checkpoints and results);
- a *meta* strategy (``auto``) is never built in a rank: :meth:`Strategy.train_meta` turns the
  config into runs of concrete strategies in the launcher.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
import torch.distributed as dist

from gnnscale import registry
from gnnscale.data.graph import GraphStore
from gnnscale.distributed.launch import Topology
from gnnscale.errors import ConfigError
from gnnscale.sampling.base import Sampler
from gnnscale.sampling.schedule import PRESAMPLE, Schedule
from gnnscale.strategies.config import (  # noqa: F401 - Checked re-exported
    DECLARATIONS,
    Checked,
    SamplingConfig,
    StrategyConfig,
)

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from gnnscale.cache.base import CachePolicy
    from gnnscale.deps.base import DependencyManager
    from gnnscale.evaluation.footprint import Footprint
    from gnnscale.models.base import GNN
    from gnnscale.optim.base import OptimizerFactory
    from gnnscale.partition.provider import PartitionProvider
    from gnnscale.tasks.base import Task


@dataclass
class RunContext:
    """Runtime objects a strategy works with (each built from its own sub-config). ``task``
    (default: node classification on ``graph``) owns the loss and the metrics; ``graph`` is
    the graph it prepared (for link prediction, the message graph)."""

    topo: Topology
    graph: GraphStore
    model: GNN
    sampler: Sampler | None
    cache_policy: CachePolicy
    deps: DependencyManager
    partition: PartitionProvider
    optim: OptimizerFactory
    seed: int
    task: Task | None = None

    def __post_init__(self) -> None:
        if self.task is None:
            from gnnscale.tasks.node import NodeTask

            self.task = NodeTask()
            self.task.prepare(self.graph)


class Strategy(ABC):
    """Trains one epoch at a time; metrics come back as a dict of per-rank figures."""

    #: Its declarations and launcher checks: a torch-free class in the strategy's
    #: ``config.py``. The declarations below (``name``, ``samples``, ``deps``, ...) are copied
    #: from it; a subclass that sets them in its own body (and no ``schema``) gets a schema
    #: made of them, so they still have one source.
    schema: ClassVar[type[StrategyConfig]] = StrategyConfig
    name: ClassVar[str] = ""
    samples: ClassVar[bool] = True
    layer_by_layer: ClassVar[bool] = False
    takes_weighted_blocks: ClassVar[bool] = True
    takes_edge_features: ClassVar[bool] = False
    reads: ClassVar[tuple[str, ...]] = StrategyConfig.reads
    deps: ClassVar[str] = "any"
    default_deps: ClassVar[str] = "depcache"
    default_cache: ClassVar[str] = "none"
    auto_candidate: ClassVar[bool] = True
    meta: ClassVar[bool] = False
    exchange_keys: ClassVar[tuple[str, ...]] = ()
    items_per_rank: ClassVar[bool] = False
    reductions: ClassVar[Mapping[str, str]] = StrategyConfig.reductions
    columns: ClassVar[tuple[str, ...]] = StrategyConfig.columns

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = {k: v for k, v in vars(cls).items() if k in DECLARATIONS and not callable(v)}
        if "schema" not in cls.__dict__ and own:  # declared in the class body
            cls.schema = type(f"{cls.__name__}Declarations", (cls.schema,), own)
        if not cls.schema.name:
            cls.schema = type(f"{cls.__name__}Declarations", (cls.schema,),
                              {"name": cls.__name__.lower()})
        for key in DECLARATIONS:  # a method of that name (DataParallel.samples) stays
            if not callable(getattr(cls, key, None)):
                setattr(cls, key, getattr(cls.schema, key))

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.group: dist.ProcessGroup | None = None  # None: the world
        self.reports = True

    # -- what it declares, and its checks before any rank starts --------------------------------
    @classmethod
    def preferred(cls, cfg: DictConfig) -> dict[str, str]:
        """The deps and cache options it runs with on ``cfg`` when the user set none."""
        return cls.schema.preferred(cfg)

    @classmethod
    def why_not_candidate(cls, cfg: DictConfig) -> str | None:
        """Why ``strategy=auto`` should not profile it on ``cfg`` (None: it may)."""
        return cls.schema.why_not_candidate(cfg)

    @classmethod
    def check(cls, cfg: DictConfig, built: Checked) -> None:
        """Every check of its schema on ``cfg``: its own options, against the config, against
        the dataset (when ``built.graph`` is known) and, when the schema asks for it,
        :meth:`check_built`; raises :class:`ConfigError`."""
        options = registry.instance(cls.schema, cfg.strategy)
        if options is not None:
            options.check()
        cls.schema.check_config(cfg, built)
        if built.graph is not None:
            cls.schema.check_data(cfg, built)
            if cls.schema.checks_built(cfg):
                cls.check_built(cfg, built)

    @classmethod
    def check_built(cls, cfg: DictConfig, built: Checked) -> None:
        """Checks that need the loaded graph and built components, in the launcher (only
        when the schema's ``checks_built`` says so; default none)."""
        return None

    @classmethod
    def train_meta(cls, cfg: DictConfig, train: Callable[[DictConfig], dict],
                   profile: Callable[..., dict] | None = None) -> dict:
        """A meta strategy's whole run, in the launcher; ``train`` runs one concrete config,
        ``profile`` several in one launch, then the pick's run in it
        (:func:`~gnnscale.runner.profile.profile_configs`)."""
        raise NotImplementedError(f"strategy={cls.name} is not a meta strategy")

    # -- what the runner calls ----------------------------------------------------------------
    @abstractmethod
    def setup(self) -> None:
        """Build what the epochs need (wrapped model, optimizer, feature store, ...)."""

    @abstractmethod
    def train_epoch(self, epoch: int, progress: Any = None) -> dict[str, float]:
        """One pass over the training set; returns this rank's metrics (see runner.metrics)."""

    def num_steps(self, epoch: int) -> int | None:
        """Steps of ``epoch`` (for the progress bar); None when the strategy does not step."""
        return None

    def evaluate(self, batch_size: int, splits: tuple[str, ...] = ("val", "test")
                 ) -> dict[str, float]:
        """The task's metrics per split, the same on every reporting rank (collective on
        :attr:`group`). Default: layer-wise full-neighbourhood inference, on the features as
        the run trains on them (a strategy that reads the cache config: rounded to its
        ``cache.feature_dtype``, :func:`gnnscale.evaluation.evaluate.features_as`)."""
        from gnnscale.evaluation.evaluate import features_as

        dtype = getattr(self.ctx.cache_policy, "feature_dtype", None) \
            if "cache" in self.reads else None
        with features_as(dtype):
            return self.ctx.task.evaluate(self.module, self.ctx.graph, self.ctx.topo.device,
                                          batch_size, splits, group=self.group)

    @property
    def module(self) -> torch.nn.Module:
        """The bare model (unwrapped), for evaluation and checkpoints (set by ``setup``)."""
        return self._module

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The optimizer, for checkpoints (set by ``setup``)."""
        return self._optimizer

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release threads and buffers."""


def dropout_step_key(epoch: int, step: int) -> int:
    """The dropout key of a training step (beside the run's seed): a sampling strategy keys
    the masks of a step by it, so the mask of a vertex's row in a layer is a function of
    (seed, epoch, step, layer, global vertex id) whichever rank computes it (split's owners and
    replicas, factored's trainer of a job) and a step equals one process keyed alike."""
    return (int(epoch) << 32) | int(step)


class SamplingStrategy(Strategy):
    """A strategy that trains on global mini-batches of ``batch_size`` training items,
    sampled ahead of training: a prefetch thread, or worker processes.

    :attr:`schedule` (built once, from the task) says which items, seeds and sample seed every
    draw has: by default one micro-batch per rank and step (a strategy with other slots
    replaces it). A strategy that gathers edge features (:attr:`takes_edge_features`) asks the
    sampler for its blocks' edge ids when the model reads them.
    ``prefetch`` is how many mini-batches are sampled ahead (0: inline);
    ``sample_workers`` > 0 samples in that many processes
    (:class:`~gnnscale.sampling.workers.SamplerPool`).
    """

    schema = SamplingConfig

    def __init__(self, ctx: RunContext, batch_size: int = 1024, prefetch: int = 2,
                 sample_workers: int = 0) -> None:
        super().__init__(ctx)
        if batch_size < 1:
            raise ConfigError(f"strategy.batch_size must be >= 1, got {batch_size}")
        if prefetch < 0:
            raise ConfigError(f"strategy.prefetch must be >= 0, got {prefetch}")
        if sample_workers < 0:
            raise ConfigError(f"strategy.sample_workers must be >= 0, got {sample_workers}")
        if ctx.sampler is None:
            raise ConfigError(f"strategy={type(self).__name__} samples mini-batches: give a "
                              "sampler (e.g. sampler=neighbor)")
        if self.takes_edge_features and getattr(ctx.model, "reads_edge_features", False):
            ctx.sampler.with_edge_ids = True  # its blocks' edge features are gathered by id
        self.batch_size, self.prefetch, self.sample_workers = batch_size, prefetch, sample_workers
        self.schedule = Schedule.of(ctx.task, batch_size=batch_size, seed=ctx.seed,
                                    slots=ctx.topo.world_size)
        self.pool = None
        self.footprint: Footprint | None = None  # set by the runner when footprint=true

    def visited(self, input_nodes: torch.Tensor) -> None:
        """Count a trained micro-batch's input nodes for the footprint metric (if it is on)."""
        if self.footprint is not None:
            self.footprint.add(input_nodes)

    def num_steps(self, epoch: int) -> int:
        """The global mini-batches of ``epoch``."""
        return self.schedule.num_steps(epoch)

    def partition_book(self, kind: str = "edge_cut"):
        """This run's partition book with one part per rank, of ``kind``; sampling-frequency
        vertex weights (GSplit) are measured here when the partitioner asks for them: one
        pre-sampling epoch of the task's own seeds, one micro-batch per rank."""
        ctx = self.ctx
        weights = None
        if ctx.partition.wants_sample_frequency:
            from gnnscale.cache.base import visit_counts

            world = ctx.topo.world_size
            weights = visit_counts(ctx.graph, sampler=ctx.sampler, epochs=[0],
                                   schedule=self.schedule.replace(stream=PRESAMPLE, slots=world))
        return ctx.partition.get(ctx.topo.world_size, kind=kind, vertex_weights=weights)

    def start_sampler_pool(self) -> None:
        """Start the worker processes (when ``sample_workers`` > 0)."""
        if self.sample_workers > 0:
            from gnnscale.sampling.workers import SamplerPool

            self.pool = SamplerPool(self.ctx.sampler, self.ctx.graph, self.sample_workers,
                                    depth=self.prefetch + self.sample_workers)

    def close(self) -> None:
        """Stop the sampler processes, if any."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None


def build_task(cfg: DictConfig, graph: GraphStore | None = None) -> tuple[Task, GraphStore]:
    """The run's task and the graph it trains on (link prediction: the message graph), from
    ``graph`` when given (a host's part of a partitioned layout, or the dataset loaded
    already), else the dataset's. The first of the one builder's two steps
    (:meth:`gnnscale.runner.plan.RunPlan.build`): every context that builds a run's task and
    graph calls it, so each gets the task's ``prepare``."""
    from gnnscale.tasks.node import NodeTask

    task = registry.build(cfg.task) if cfg.get("task") is not None else NodeTask()
    source = graph if graph is not None else registry.build(cfg.dataset).load()
    return task, task.prepare(source, cfg.data_root, cfg.seed)


def build_model(cfg: DictConfig, graph: GraphStore, task: Task, private_temp: bool = False
                ) -> torch.nn.Module:
    """The model with the task's head, in its initial parameters: seeded by ``cfg.seed``, the
    same on every rank (and in every launcher-side build: ``strategy=auto``'s initial losses,
    ``offload``'s plan of every rank's chunks, a finished run's loader). The second step of
    the one builder; ``private_temp``: PyG's generated modules go to a temp folder of their
    own, removed after (a launcher's build; a rank's temp folder is its own already)."""
    from contextlib import nullcontext

    from gnnscale.distributed.launch import private_temp_dir

    torch.manual_seed(cfg.seed)
    with private_temp_dir() if private_temp else nullcontext():
        model = registry.build(model_node(cfg, graph), in_channels=graph.num_features,
                               out_channels=task.out_channels(graph))
    task.attach(model)  # the task's head (a decoder) trains with the model
    model.bind_graph(graph)
    return model


def model_node(cfg: DictConfig, graph: GraphStore) -> Any:
    """``cfg.model`` with ``edge_dim=auto`` (or ``kwargs.edge_dim=auto``) filled with the
    graph's edge feature width (the schema's ``edge_inputs``) and ``kwargs.deg=auto`` with its
    in-degree histogram (``graph_inputs``); unchanged otherwise."""
    from omegaconf import OmegaConf

    spec = registry.options("model", cfg.model)
    if spec is None or not hasattr(spec, "edge_inputs"):
        return cfg.model
    width = 0 if graph.edge_attr is None else int(graph.edge_attr.shape[1])
    fills = [spec.edge_inputs(width)]
    if hasattr(spec, "graph_inputs"):  # model.kwargs.deg=auto: the graph's degree histogram
        fills.append(spec.graph_inputs(graph))
    fills = [f for f in fills if f]
    return OmegaConf.merge(cfg.model, *fills) if fills else cfg.model
