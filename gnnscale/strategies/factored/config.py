"""``strategy=factored``'s typed schema, declarations and launcher checks (torch-free;
``Factored`` takes its declarations and value checks from here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.schema import Reduce, require_at_least
from gnnscale.strategies.config import Checked, SamplingConfig


def parse_samplers(value: str | int, world: int) -> int | None:
    """``strategy.samplers`` as a count (None for ``auto``); raises :class:`ConfigError`."""
    text = str(value).strip().lower()
    if text == "auto":
        return None
    try:
        count = int(text)
    except ValueError:
        raise ConfigError(f"strategy.samplers must be 'auto' or a count, got {value!r}") from None
    if world == 1 and count != 0:
        raise ConfigError(f"strategy.samplers={count} with dist.world_size=1: one rank samples "
                          "the whole epoch then trains; use strategy.samplers=auto or 0")
    if world > 1 and not 1 <= count <= world - 1:
        raise ConfigError(f"strategy.samplers={count} with dist.world_size={world}: give between "
                          f"1 and {world - 1} samplers (at least one rank must train and one "
                          "sample), or strategy.samplers=auto")
    return count


def check_sync(staleness: Any, switching: Any, world: int) -> None:
    """``strategy.staleness`` and ``strategy.switching`` or a :class:`ConfigError`."""
    if not isinstance(switching, bool):
        raise ConfigError(f"strategy.switching must be true or false, got {switching!r}")
    if not isinstance(staleness, int) or isinstance(staleness, bool) or staleness < 0:
        raise ConfigError(f"strategy.staleness must be an integer >= 0 (steps a rank may run "
                          f"ahead of the slowest), got {staleness!r}")
    if staleness > 0 and world == 1:
        raise ConfigError(f"strategy.staleness={staleness} with dist.world_size=1: one rank "
                          "has nobody to run ahead of; use strategy.staleness=0")


def check_sparse_tables(dataset: str, staleness: int, switching: bool, queue: str) -> None:
    """What factored refuses on a typed graph with featureless node types (their sparse
    embedding tables are gathered per step on the trainers, not in the dense reduction)."""
    if switching:
        raise ConfigError(f"strategy.switching=true on dataset {dataset}: its featureless node "
                          "types train sparse embedding tables, which standby trainers cannot "
                          "reduce without stalling the trainers; use strategy.switching=false")
    if staleness > 0 and queue != "shared":
        raise ConfigError(f"strategy.staleness={staleness} with strategy.queue={queue} on "
                          f"dataset {dataset}: its featureless node types train sparse embedding "
                          "tables, which only the shared queue reduces per step; use "
                          "strategy.queue=shared or strategy.staleness=0")


@register("strategy", "factored")
@dataclass
class FactoredConfig(SamplingConfig):
    """``strategy=factored``'s options: sampler ranks feed trainer ranks (GNNLab/FGNN)."""

    name: ClassVar[str] = "factored"
    deps: ClassVar[str] = "replicate"
    default_deps: ClassVar[str] = "depcache"
    default_cache: ClassVar[str] = "presample"
    trains_types: ClassVar[bool] = True  # trainers train types as data does (sparse tables)
    #: parts=: the whole topology and labels, the others' rows from every rank's row server
    from_parts: ClassVar[bool] = True
    takes_edge_features: ClassVar[bool] = True  # trainers gather them from the jobs' edge ids
    #: Samplers and trainers run at their own pace, joined by a queue: an unbound rank takes
    #: the core its peer leaves idle, so it runs unbound (bound: 0.84-0.91x the epoch speed,
    #: docs/results/binding.json).
    binds_cores: ClassVar[bool] = False
    #: the role totals: seconds summed over the sampler ranks or over the trainer ranks
    reductions: ClassVar[dict[str, Reduce]] = {
        "sampler_busy_time": Reduce.sum, "sampler_idle_time": Reduce.sum,
        "trainer_busy_time": Reduce.sum, "trainer_idle_time": Reduce.sum,
        "standby_train_time": Reduce.sum,
        "presample_time": Reduce.max,  # the slowest sampler's
        # typed graphs, per trainer as under data: each holds the whole tables
        "embedding_rows_held": Reduce.max, "embedding_bytes": Reduce.max,
        "embedding_rows_touched": Reduce.mean,
        "bytes_edge_features": Reduce.sum,  # edge feature rows the trainers read
    }
    _target_: str = "gnnscale.strategies.factored.Factored"
    batch_size: int = 1024  # global mini-batch (all trainers together)
    samplers: str = "auto"  # sampler ranks: a count, or auto (GNNLab's rule, profiled)
    queue_depth: int = 2  # jobs one sampler may have in flight per trainer
    staleness: int = 0  # steps a rank may run ahead of the slowest (0: synchronous, exact)
    switching: bool = False  # finished samplers train as standby trainers while it pays
    queue: str = "shared"  # shared: a ring per host any trainer takes from; routes: p2p
    prefetch: int = 1  # shared queue: jobs a trainer claims and gathers ahead of training
    queue_slot_mb: int = 256  # shared queue: bound of one job in the ring (MiB, sparse)
    jobs_per_trainer: str = "auto"  # shared queue: a step is jobs_per_trainer x T jobs

    def check(self) -> None:
        """The batch size, a queue depth >= 1 and the shared queue's settings."""
        super().check()
        require_at_least("strategy.queue_depth", self.queue_depth, 1)
        check_queue(self.queue, self.prefetch, self.queue_slot_mb)
        parse_jobs_per_trainer(self.jobs_per_trainer, self.queue)

    @classmethod
    def check_config(cls, cfg: Any, built: Checked) -> None:
        """Sampler count, switching/staleness and the cache placement against the ranks."""
        super().check_config(cfg, built)
        world = cfg.dist.world_size
        count = parse_samplers(cfg.strategy.samplers, world)
        if count is not None and world - count < 1:
            raise ConfigError(f"strategy.samplers={count} leaves no trainer among "
                              f"dist.world_size={world} ranks")
        check_sync(cfg.strategy.staleness, cfg.strategy.switching, world)
        jobs = parse_jobs_per_trainer(cfg.strategy.jobs_per_trainer, cfg.strategy.queue)
        if world == 1 and jobs is not None and jobs > 1:
            raise ConfigError("strategy.jobs_per_trainer > 1 with dist.world_size=1: one rank "
                              "trains one job per step; use strategy.jobs_per_trainer=auto or 1")
        if cfg.get("cache") is not None and cfg.cache.get("placement") == "partitioned":
            raise ConfigError("strategy=factored caches on trainers only: use "
                              "cache.placement=replicated")


    @classmethod
    def check_data(cls, cfg: Any, built: Checked) -> None:
        """:meth:`StrategyConfig.check_data`, and what sparse embedding tables (a typed
        graph's featureless types) rule out: :func:`check_sparse_tables`."""
        super().check_data(cfg, built)
        graph = built.graph
        if graph is not None and graph.is_typed and 0 in graph.feature_dims:
            check_sparse_tables(graph.name, cfg.strategy.staleness, cfg.strategy.switching,
                                cfg.strategy.queue)


def check_queue(queue: Any, prefetch: Any, slot_mb: Any) -> None:
    """``strategy.queue``, ``strategy.prefetch`` and ``strategy.queue_slot_mb`` or a
    :class:`ConfigError`."""
    if queue not in ("shared", "routes"):
        raise ConfigError(f"strategy.queue must be shared (one ring any trainer takes from) or "
                          f"routes (each job to the trainer of its slot), got {queue!r}")
    if not isinstance(prefetch, int) or isinstance(prefetch, bool) or prefetch < 0:
        raise ConfigError(f"strategy.prefetch must be an integer >= 0 (jobs a trainer gathers "
                          f"ahead), got {prefetch!r}")
    if not isinstance(slot_mb, int) or isinstance(slot_mb, bool) or slot_mb < 1:
        raise ConfigError(f"strategy.queue_slot_mb must be an integer >= 1 (MiB), got "
                          f"{slot_mb!r}")


JOBS_PER_TRAINER = 2  # auto's count where it splits (docs/results/factored_queue.json)


def auto_jobs_per_trainer(shared: bool, trainers: int, staleness: int) -> int:
    """``jobs_per_trainer=auto``: :data:`JOBS_PER_TRAINER` where micro-batching is the only way
    to move work to a faster trainer (the shared queue, several trainers, ``staleness=0``),
    else 1 (a smaller job samples more nodes per target, so it is not split for nothing)."""
    return JOBS_PER_TRAINER if shared and trainers > 1 and staleness == 0 else 1


def parse_jobs_per_trainer(value: Any, queue: str) -> int | None:
    """``strategy.jobs_per_trainer`` as a count, None for ``auto``
    (:func:`auto_jobs_per_trainer`); raises :class:`ConfigError`."""
    text = str(value).strip().lower()
    if text == "auto":
        return None
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1 or str(count) != text:
        raise ConfigError(f"strategy.jobs_per_trainer must be 'auto' or an integer >= 1 (a "
                          f"step's mini-batch is cut into that many jobs per trainer), got "
                          f"{value!r}")
    if count > 1 and queue != "shared":
        raise ConfigError(f"strategy.jobs_per_trainer={count} needs strategy.queue=shared: on "
                          "fixed routes each trainer takes one job per step; use "
                          "strategy.jobs_per_trainer=auto or 1")
    return count
