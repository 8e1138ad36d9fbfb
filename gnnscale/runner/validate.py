"""Checks on a composed config (and its dataset) that turn bad values into clear errors, in the
launching process, before any rank starts.

Torch-free up to the dataset (a user's own model, ``model=custom``, is imported to check its
contract): the root keys, every component's schema
(:meth:`gnnscale.schema.Options.check`), the model options the strategy settles (``auto``
values, :func:`settle_model`) and the task's and the strategy's declarations
(``tasks/<name>/config.py``, ``strategies/<name>/config.py``) decide from the config alone;
then the dataset's metadata (``meta.json``) is read (the dataset is processed first when it
has not been: that imports torch) for the checks that need its sizes. A task that derives its
own data from the dataset (``derives_data``: link prediction's edge split) prepares it here,
once, and is checked on the prepared graph. Only a strategy whose schema asks for it
(``checks_built``) gets the loaded graph and built components. A run given a partitioned
layout (``parts=DIR``) reads its metadata from the layout instead, after the layout's checks
(:func:`gnnscale.partition.layout.check_run`: the strategy can train from parts, the layout is
this run's, every part this process's ranks read is there and of one partitioning). A layout
missing on a single-host launch is written before these checks by the launcher's own step
(:func:`gnnscale.runner.prepare.prepare_data`), never by them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import fields, is_dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from omegaconf import DictConfig

from gnnscale import registry
from gnnscale.data.metadata import DatasetMeta
from gnnscale.errors import ConfigError, UserError
from gnnscale.runner.plan import RunPlan, frozen_config
from gnnscale.strategies.config import Checked, StrategyConfig, declared, settle_model_options
from gnnscale.tasks.config import TaskConfig, declared_task

if TYPE_CHECKING:
    from gnnscale.strategies.base import Strategy

#: The largest ``seed``: numpy's legacy generators and 64-bit RNG counters mixed with it.
MAX_SEED = 2**32 - 1


def check_config(cfg: DictConfig) -> dict[str, Any]:
    """Every check the config alone decides (:func:`check_plan`); returns the model options
    the strategy settled, ``{"model.<key>": value}``."""
    return dict(check_plan(cfg).settled)


def check_plan(cfg: DictConfig) -> RunPlan:
    """Every check the config alone decides: the task's options and declarations, the run's
    own keys, each component's options, the strategy against the rest of the config. The
    model options left to the run are settled first (:func:`settle_model`, which ``cfg``
    keeps). Returns the run's :class:`~gnnscale.runner.plan.RunPlan` without the dataset's
    metadata (:func:`validate_data` adds it): its declarations read here, once."""
    task = declared_task(cfg)
    task_options = group_options("task", task, cfg.get("task"))
    task_options.check()
    task.check_config(cfg)
    if not 0 <= cfg.seed <= MAX_SEED:
        raise ConfigError(f"seed must lie in [0, {MAX_SEED}] (2**32 - 1: it seeds torch, numpy "
                          f"and the native RNG counters), got {cfg.seed}")
    if cfg.epochs < 1:
        raise ConfigError(f"epochs must be >= 1, got {cfg.epochs}")
    if cfg.eval_every < -1:
        raise ConfigError(f"eval_every must be >= -1 (0 = only after the last epoch, -1 = "
                          f"never), got {cfg.eval_every}")
    if cfg.eval_batch_size < 1:
        raise ConfigError(f"eval_batch_size must be >= 1, got {cfg.eval_batch_size}")
    check_early_stop(cfg)
    check_unused_cache_budget(cfg)
    # the model last: a custom model's check imports torch, PyG and the user's module
    registry.check_options(cfg, [g for g in registry.GROUPS
                                 if g not in ("task", "strategy", "model")] + ["model"])
    decl = declared(cfg.strategy)
    settled = settle_model(cfg, decl)
    optim, model = registry.options("optim", cfg.get("optim")), cfg.get("model")
    if optim is not None and model is not None and hasattr(optim, "check_layers"):
        optim.check_layers(model.num_layers)
    strategy_options = group_options("strategy", decl, cfg.strategy)
    strategy_options.check()
    checked = Checked.build(cfg)
    decl.check_config(cfg, checked)
    if not decl.meta and cfg.get("resume"):  # a meta strategy's concrete run: its checkpoint
        from gnnscale.runner.resume import ResumeError, check_resume

        try:
            check_resume(cfg)
        except ResumeError as err:
            raise ConfigError(str(err)) from err
    return RunPlan(config=cfg, strategy=decl, task=task,
                   strategy_options=cast(StrategyConfig, strategy_options),
                   task_options=cast(TaskConfig, task_options),
                   checked=checked, settled=settled)


def settle_model(cfg: DictConfig, decl: type[StrategyConfig] | None = None) -> dict[str, Any]:
    """Set the model options left to the run (``auto``, e.g. ``model.gcn_norm``) to what the
    strategy asks of the model's schema (:func:`~gnnscale.strategies.config.settle_model_options`),
    said in one line; a value the user set is kept (and checked like any other). A meta strategy
    (``auto``) leaves them to each concrete run. Returns ``{"model.<key>": value}``."""
    decl = decl or declared(cfg.strategy)
    chosen = settle_model_options(cfg, decl)
    if not chosen:
        return {}
    said = "; ".join(f"model.{k}={v} ({why})" for k, (v, why) in chosen.items())
    print(f"note: strategy={decl.name}: {said}", flush=True)
    return {f"model.{k}": v for k, (v, _) in chosen.items()}


def group_options(group: str, decl: type[StrategyConfig] | type[TaskConfig],
                  node: DictConfig | None) -> StrategyConfig | TaskConfig:
    """``cfg.<group>`` (``strategy`` or ``task``) as an instance of its declarations class; a
    key the class has no field for is refused (an option's yaml outside gnnscale is not typed
    by Hydra)."""
    names = {f.name for f in fields(decl)} if is_dataclass(decl) else {"_target_"}
    unknown = sorted(str(k) for k in node or () if k not in names)
    if unknown:
        raise ConfigError(f"{group}.{unknown[0]} is not an option of {group}={decl.name} "
                          f"(its options: {sorted(names - {'_target_'})})")
    return (registry.instance(decl, node) if node is not None else None) or decl()


def check_early_stop(cfg: DictConfig) -> None:
    """Early stopping reads validation losses: it needs a patience and evaluations."""
    stop = cfg.get("early_stop")
    rule = getattr(stop.rule, "value", stop.rule) if stop is not None else "none"
    if rule == "none":
        return
    if stop.patience < 1:
        raise ConfigError(f"early_stop.rule={rule} needs early_stop.patience >= 1 (evaluations; "
                          f"Shchur et al. 50, Kipf & Welling 10), got {stop.patience}")
    if cfg.eval_every < 1:
        raise ConfigError(f"early_stop.rule={rule} reads the validation loss of each "
                          "evaluation: set eval_every >= 1 (eval_every=0 evaluates only "
                          "after the last epoch)")


def check_unused_cache_budget(cfg: DictConfig) -> None:
    """``cache=none`` with a budget set caches nothing: harmless (a sweep such as
    ``cache=none,degree cache.ratio=0.1,0.25`` sets one beside it), so a note, not an error."""
    cache = cfg.get("cache")
    if cache is None or not str(cache.get("_target_", "")).endswith(".NoCache"):
        return
    for key in ("ratio", "bytes", "auto"):
        if cache.get(key):
            print(f"note: cache.{key}={cache.get(key)} has no effect with cache=none (nothing "
                  "is cached)", flush=True)


def strategy_class(cfg: DictConfig) -> type[Strategy]:
    """The strategy class ``cfg.strategy._target_`` names (imports it: torch)."""
    from hydra.utils import get_object

    return get_object(cfg.strategy._target_)


#: Generated graphs that stand in for a real dataset and need no download.
LOOKALIKES = {"products": "products_sim", "papers100m": "papers_like"}


def open_dataset(cfg: DictConfig) -> Any:
    """Process (once) and open the dataset; missing raw files are a short :class:`UserError`
    that says where to put them and which generated graph needs none."""
    from gnnscale.data.convert import DatasetNotFoundError

    try:
        return registry.build(cfg.dataset).load()
    except DatasetNotFoundError as err:
        lines = str(err).splitlines()
        head, _, files = lines[0].partition(" Expected ")
        files = files.removesuffix(" in one of:")
        where = f" {lines[1].strip()}" if len(lines) > 2 else ""
        more = f" (or {len(lines) - 3} other folders)" if len(lines) > 4 else ""
        alike = LOOKALIKES.get(str(cfg.dataset.get("name") or "").lower(), "synthetic")
        raise UserError(f"{head}\nput {files} in{where}{more}, or set dataset.raw_dir (or "
                        "GNNSCALE_DATA) to the folder holding them;\na generated graph needs no "
                        f"download: dataset={alike}") from None


def dataset_meta(cfg: DictConfig) -> tuple[DatasetMeta, Any]:
    """The dataset's metadata, read from its processed ``meta.json`` (torch-free); when there
    is none yet the dataset is processed first (and returned as the second item, else None)."""
    options = registry.options("dataset", cfg.dataset)
    folder = options.processed_dir() if options is not None else None
    meta = DatasetMeta.read(folder)
    if meta is not None:
        return meta, None
    graph = open_dataset(cfg)
    return DatasetMeta.of(graph), graph


def check_dataset(plan: RunPlan, loaded: Any = None) -> None:
    """The checks that read the dataset (``plan.meta``: its metadata), then, when the
    strategy's schema asks for them, those on the loaded graph (``loaded``, the dataset's as
    loaded, else loaded there) and built components."""
    cfg, built, decl = plan.config, plan.built(loaded), plan.strategy
    graph, world = built.graph, plan.world_size
    if graph is None:
        raise ValueError("check_dataset reads the dataset's metadata: give it a plan with it "
                         "(RunPlan.with_meta)")
    if graph.num_nodes < world:
        raise ConfigError(f"dataset {graph.name} has {graph.num_nodes} vertices, fewer than "
                          f"dist.world_size={world} ranks: use at most {graph.num_nodes} ranks")
    decl.check_data(cfg, built)
    if decl.checks_built(cfg):
        strategy_class(cfg).check_built(cfg, built)


def check_data(cfg: DictConfig, graph: Any) -> RunPlan:
    """Every check on ``cfg`` with its dataset ``graph`` (a loaded graph or its
    :class:`DatasetMeta`): :func:`check_config`'s, then those that read the dataset."""
    plan = check_plan(cfg)
    meta = graph if isinstance(graph, DatasetMeta) else DatasetMeta.of(graph)
    plan = plan.with_meta(meta)
    check_dataset(plan, None if isinstance(graph, DatasetMeta) else graph)
    return plan


def validate(cfg: DictConfig, prepare: Callable[[RunPlan], None] | None = None) -> RunPlan:
    """The one validation pass, in the launcher before any rank starts: everything the config
    decides (:func:`check_plan`, torch-free), then the checks that read the data
    (:func:`validate_data`). Returns the run's :class:`~gnnscale.runner.plan.RunPlan`, the
    value everything after the checks reads (its config a copy of its own). The checks write
    nothing; ``prepare``: the launcher's own data step, run between the two halves
    (:func:`gnnscale.runner.prepare.prepare_data`: a missing part layout written first)."""
    plan = check_plan(cfg)
    if prepare is not None:
        prepare(plan)
    plan = validate_data(plan)
    return replace(plan, config=frozen_config(plan.config))


def validate_data(plan: RunPlan | DictConfig) -> RunPlan:
    """The checks that read the data of a checked ``plan`` (or config: planned here, its
    config checks run already): the dataset's metadata (processed here once when needed; a
    task's derived data, link's edge split, prepared here once) or, with ``parts=``, the
    layout's; then those on the loaded graph and built components. Returns the plan with the
    metadata (a meta strategy's as it was: each candidate is planned alone)."""
    if not isinstance(plan, RunPlan):
        plan = RunPlan.of(plan)
    cfg = plan.config
    loaded = None
    if plan.parts:  # a partitioned layout: its metadata, its parts this process reads
        meta = parts_meta(cfg, plan.checked, plan)
    elif plan.strategy.meta:  # each candidate is validated alone when profiled
        return plan
    elif plan.task.derives_data:  # e.g. link's edge split: processed once, here
        loaded = open_dataset(cfg)
        meta = DatasetMeta.of(prepare_task(plan, loaded))
    else:
        meta, loaded = dataset_meta(cfg)
    plan = plan.with_meta(meta)
    if cfg.get("resume"):  # the checkpoint's graph against this one
        from gnnscale.runner.resume import check_graph

        check_graph(cfg, meta)
    check_dataset(plan, loaded)
    return plan


def parts_problem(cfg: DictConfig, built: Checked) -> str | None:
    """Why ``cfg`` cannot train from a partitioned layout (None: it can), as its strategy and
    task declare it (``from_parts``; the strategy's ``parts_problem`` says what it needs of
    the layout and its options, e.g. fullgraph's ``deps=depcomm``)."""
    return declared(cfg.strategy).parts_problem(cfg, built) or declared_task(cfg).parts_problem()


def parts_meta(cfg: DictConfig, built: Checked, plan: RunPlan | None = None) -> DatasetMeta:
    """The metadata of ``cfg.parts``' graph, after :func:`parts_problem` and
    :func:`gnnscale.partition.layout.check_run` on the parts this process's ranks read (all of
    them; under torchrun its own rank's)."""
    from gnnscale.distributed.schemas import under_torchrun
    from gnnscale.partition.layout import check_run

    problem = parts_problem(cfg, built)
    if problem:
        raise ConfigError(problem)
    ranks = [int(os.environ["RANK"])] if under_torchrun() else \
        list(range(int(cfg.dist.world_size)))
    meta = check_run(cfg, ranks)
    decl = plan.strategy if plan is not None else declared(cfg.strategy)
    if decl.samples and any(meta.edge_feature_dims):
        raise ConfigError(f"parts={cfg.parts} keeps each edge's features in its destination's "
                          f"part, but strategy={decl.name} samples any edge: "
                          "drop parts= to train a graph with edge features by sampling")
    return meta


def prepare_task(plan: RunPlan, graph: Any) -> Any:
    """The graph ``plan``'s task trains on (link prediction: the message graph, its split
    processed once and stored; :meth:`~gnnscale.runner.plan.RunPlan.build_task`), after the
    task's own checks on it (imports torch)."""
    try:
        task, prepared = plan.build_task(graph)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"task: {err}") from err
    task.check(prepared, plan.world_size)
    return prepared
