"""Strategy base: who computes what, in which order. One class per strategy, same few methods.

A strategy declares itself with class attributes (:attr:`Strategy.samples`, :attr:`deps`,
:attr:`default_deps`, :attr:`default_cache`, :attr:`auto_candidate`, ...) and checks a config
once, in the launcher, with :meth:`Strategy.check`. The runner (:mod:`gnnscale.runner.worker`)
knows only this contract:

- :meth:`Strategy.check` (class method, in the launching process before any rank starts):
  refuse a config this strategy cannot run, with the key to change;
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
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
import torch.distributed as dist

from gnnscale.data.graph import GraphStore
from gnnscale.distributed.launch import Topology
from gnnscale.errors import ConfigError
from gnnscale.sampling.base import Sampler

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
class Checked:
    """What the launcher built once from a config, for every strategy check to read (nothing
    is rebuilt to validate): the loaded graph (as the task prepared it), the model, the
    dependency manager and the task."""

    graph: GraphStore
    model: GNN
    deps: DependencyManager
    task: Task | None = None

    @classmethod
    def build(cls, cfg: DictConfig, graph: GraphStore, task: Task | None = None) -> Checked:
        """Build the model and the deps manager of ``cfg`` for ``graph`` (one pass)."""
        from gnnscale import registry
        from gnnscale.distributed.launch import private_temp_dir

        out = graph.num_classes if task is None else task.out_channels(graph)
        try:
            with private_temp_dir():  # PyG writes its generated modules to the temp folder
                model = registry.build(cfg.model, in_channels=graph.num_features,
                                       out_channels=out)
        except (ValueError, TypeError, RuntimeError) as err:
            raise ConfigError(f"model: {err}") from err
        try:
            deps = registry.build(cfg.deps)
        except (ValueError, TypeError) as err:
            raise ConfigError(f"deps: {err}") from err
        return cls(graph=graph, model=model, deps=deps, task=task)


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

    #: The option name (``strategy=<name>``); defaults to the class name in lower case.
    name: ClassVar[str] = ""
    #: Whether this strategy draws mini-batches with ``sampler`` (its fanouts are checked).
    samples: ClassVar[bool] = True
    #: Whether it trains on blocks that carry ``edge_weight`` (``sampler=random_walk``).
    takes_weighted_blocks: ClassVar[bool] = True
    #: The component config groups whose settings this strategy uses (the others are composed
    #: but ignored; ``scripts/compare.py`` leaves them out of its run labels).
    reads: ClassVar[tuple[str, ...]] = ("sampler", "cache", "deps", "partition")
    #: The dependency managers it runs with: ``replicate`` (every dependency replicated:
    #: deps=depcache), ``communicate`` (deps that communicate: depcomm, hybrid) or ``any``.
    deps: ClassVar[str] = "any"
    #: Its deps and cache options when the user set none (the papers' settings; ``auto``
    #: composes each candidate with them).
    default_deps: ClassVar[str] = "depcache"
    default_cache: ClassVar[str] = "none"
    #: Whether ``strategy=auto`` may profile it.
    auto_candidate: ClassVar[bool] = True
    #: A meta strategy is resolved in the launcher into runs of concrete ones (``auto``).
    meta: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("name"):
            cls.name = cls.__name__.lower()

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.group: dist.ProcessGroup | None = None  # None: the world
        self.reports = True

    # -- what it declares, and its checks before any rank starts --------------------------------
    @classmethod
    def preferred(cls, cfg: DictConfig) -> dict[str, str]:
        """The deps and cache options it runs with on ``cfg`` when the user set none."""
        return {"deps": cls.default_deps, "cache": cls.default_cache}

    @classmethod
    def why_not_candidate(cls, cfg: DictConfig) -> str | None:
        """Why ``strategy=auto`` should not profile it on ``cfg`` (None: it may)."""
        return None if cls.auto_candidate else f"strategy={cls.name} is not an auto candidate"

    @classmethod
    def check(cls, cfg: DictConfig, built: Checked) -> None:
        """Raise :class:`ConfigError` for a config (or dataset) this strategy cannot run."""
        graph = built.graph
        if cfg.dataset is not None:
            task = built.task
            if task is None:
                from gnnscale.tasks.node import NodeTask

                task = NodeTask()
            task.check(graph, cfg.dist.world_size)
        if cls.samples:
            check_fanouts(cfg)
            check_weighted_blocks(cfg, cls)
        check_deps(cls, built.deps)

    @classmethod
    def train_meta(cls, cfg: DictConfig, train: Callable[[DictConfig], dict]) -> dict:
        """A meta strategy's whole run, in the launcher; ``train`` runs one concrete config."""
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
        :attr:`group`). Default: layer-wise full-neighbourhood inference."""
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


def check_deps(strategy: type[Strategy], deps: DependencyManager) -> None:
    """The dependency manager must be one the strategy runs with (:attr:`Strategy.deps`)."""
    if strategy.deps == "replicate" and not deps.replicates_all:
        raise ConfigError(f"strategy={strategy.name} replicates every dependency: use "
                          "deps=depcache")
    if strategy.deps == "communicate" and deps.replicates_all:
        raise ConfigError(f"strategy={strategy.name} communicates dependencies: use "
                          "deps=depcomm or deps=hybrid")


def check_fanouts(cfg: DictConfig) -> None:
    """The sampler must draw one hop per model layer, with valid fanouts."""
    fanouts = cfg.sampler.get("fanouts")
    layers = cfg.model.num_layers
    if fanouts is not None and len(fanouts) != layers:
        raise ConfigError(
            f"sampler.fanouts has {len(fanouts)} entries ({list(fanouts)}) but "
            f"model.num_layers={layers}: give one fanout per layer, e.g. "
            f"sampler.fanouts=[{','.join(['10'] * layers)}]"
        )
    sampled = cfg.sampler.get("num_layers")
    if fanouts is None and sampled is not None and sampled != layers:
        raise ConfigError(f"sampler.num_layers={sampled} but model.num_layers={layers}: "
                          "they must be equal")
    if fanouts is not None and any(f == 0 or f < -1 for f in fanouts):
        raise ConfigError(f"sampler.fanouts entries must be positive or -1 (all), got "
                          f"{list(fanouts)}")


def check_weighted_blocks(cfg: DictConfig, strategy: type[Strategy]) -> None:
    """A sampler whose blocks carry edge weights needs a strategy and a model that use them."""
    from hydra.utils import get_object

    sampler = cfg.get("sampler")
    if sampler is None or not sampler.get("_target_"):
        return
    if not getattr(get_object(sampler._target_), "weighted_blocks", False):
        return
    if not strategy.takes_weighted_blocks:
        raise ConfigError(f"{strategy.__name__} cannot carry the edge weights (visit counts) of "
                          f"{sampler._target_.rsplit('.', 1)[-1]}: use strategy=data or "
                          f"strategy=factored, or sampler=neighbor")
    model = cfg.get("model")
    if model is not None and model.get("_target_"):
        why = get_object(model._target_).why_not_weighted(model)
        if why is not None:
            raise ConfigError(why)


class SamplingStrategy(Strategy):
    """A strategy that trains on global mini-batches of ``batch_size`` training vertices,
    sampled ahead of training: a prefetch thread, or worker processes.

    ``prefetch`` is how many mini-batches are sampled ahead (0: inline); ``sample_workers`` > 0
    samples in that many processes (:class:`~gnnscale.sampling.workers.SamplerPool`).
    """

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
        self.batch_size, self.prefetch, self.sample_workers = batch_size, prefetch, sample_workers
        self.pool = None
        self.footprint: Footprint | None = None  # set by the runner when footprint=true

    def visited(self, input_nodes: torch.Tensor) -> None:
        """Count a trained micro-batch's input nodes for the footprint metric (if it is on)."""
        if self.footprint is not None:
            self.footprint.add(input_nodes)

    @classmethod
    def check(cls, cfg: DictConfig, built: Checked) -> None:
        """The sampling options, then a batch and a training set every rank can share."""
        super().check(cfg, built)
        graph = built.graph
        world, batch = cfg.dist.world_size, cfg.strategy.batch_size
        for key, low in (("batch_size", 1), ("prefetch", 0), ("sample_workers", 0)):
            value = cfg.strategy.get(key)
            if value is not None and value < low:
                raise ConfigError(f"strategy.{key} must be >= {low}, got {value}")
        if batch < world:
            raise ConfigError(f"strategy.batch_size={batch} is smaller than dist.world_size="
                              f"{world}: every rank needs at least one target per step")
        n_train = graph.train_idx.numel()
        if n_train == 0:
            raise ConfigError(f"the training set of {graph.name} is empty ({graph.num_nodes} "
                              "vertices, none marked for training): give a dataset with a "
                              "training split")
        if n_train < world:
            raise ConfigError(f"the training set of {graph.name} has {n_train} vertices but "
                              f"dist.world_size={world}: every rank needs a training vertex; "
                              f"use at most {n_train} ranks")

    def epoch_batches(self, epoch: int) -> list[torch.Tensor]:
        """The global mini-batches of ``epoch`` (the shared, seeded schedule)."""
        from gnnscale.sampling.schedule import epoch_batches

        return epoch_batches(self.ctx.task.train_items(), self.batch_size, self.ctx.seed, epoch,
                             min_size=self.ctx.topo.world_size)

    def num_steps(self, epoch: int) -> int:
        """The global mini-batches of ``epoch``."""
        return len(self.epoch_batches(epoch))

    def partition_book(self, kind: str = "edge_cut"):
        """This run's partition book with one part per rank, of ``kind``; sampling-frequency
        vertex weights (GSplit) are measured here when the partitioner asks for them."""
        ctx = self.ctx
        weights = None
        if ctx.partition.wants_sample_frequency:
            from gnnscale.cache.base import PRESAMPLE, visit_counts

            weights = visit_counts(ctx.graph, train_idx=ctx.graph.train_idx, sampler=ctx.sampler,
                                   batch_size=self.batch_size, seed=ctx.seed, epochs=[0],
                                   stream=PRESAMPLE, world_size=ctx.topo.world_size)
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
