"""Checks on a composed config (and its dataset) that turn bad values into clear errors,
in the launching process, before any rank starts."""

from __future__ import annotations

from omegaconf import DictConfig

from gnnscale.data.graph import GraphStore
from gnnscale.errors import ConfigError, UserError


def check_config(cfg: DictConfig) -> None:
    """Checks that need no data."""
    from gnnscale.tasks.schemas import check_task_config

    check_task_config(cfg)
    if cfg.epochs < 1:
        raise ConfigError(f"epochs must be >= 1, got {cfg.epochs}")
    if cfg.eval_every < 0:
        raise ConfigError(f"eval_every must be >= 0 (0 = only after the last epoch), "
                          f"got {cfg.eval_every}")
    if cfg.eval_batch_size < 1:
        raise ConfigError(f"eval_batch_size must be >= 1, got {cfg.eval_batch_size}")
    for key in ("hidden", "num_layers"):
        value = cfg.model.get(key)
        if value is not None and value < 1:
            raise ConfigError(f"model.{key} must be >= 1, got {value}")
    check_early_stop(cfg)
    check_unused_cache_budget(cfg)
    if getattr(strategy_class(cfg), "meta", False):
        return  # the concrete run it resumes is checked against its checkpoint
    from gnnscale.runner.resume import ResumeError, check_resume

    try:
        check_resume(cfg)
    except ResumeError as err:
        raise ConfigError(str(err)) from err


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
    """``cache=none`` with a budget set is a mistake, not a wish for no cache."""
    cache = cfg.get("cache")
    if cache is None or not str(cache.get("_target_", "")).endswith(".NoCache"):
        return
    for key in ("ratio", "bytes", "auto"):
        if cache.get(key):
            raise ConfigError(f"cache.{key}={cache.get(key)} has no effect with cache=none: "
                              f"pick a policy that caches (cache=degree, presample, random) "
                              f"or drop cache.{key}")


def strategy_class(cfg: DictConfig) -> type:
    """The strategy class ``cfg.strategy._target_`` names."""
    from hydra.utils import get_object

    return get_object(cfg.strategy._target_)


#: Generated graphs that stand in for a real dataset and need no download.
LOOKALIKES = {"products": "products_sim", "papers100m": "papers_like"}


def open_dataset(cfg: DictConfig) -> GraphStore:
    """Process (once) and open the dataset; missing raw files are a short :class:`UserError`
    that says where to put them and which generated graph needs none."""
    from gnnscale import registry
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


def check_data(cfg: DictConfig, graph: GraphStore) -> None:
    """Checks that need the loaded dataset: every component built once from its config, so a
    bad value fails here, not in a rank, then the strategy's own (``Strategy.check``) on the
    objects built here."""
    from gnnscale import registry
    from gnnscale.strategies.base import Checked

    for group in ("partitioner", "sampler", "cache", "optim", "dist"):
        if cfg.get(group) is not None:
            try:
                registry.build(cfg[group])
            except (ValueError, TypeError) as err:
                raise ConfigError(f"{group}: {err}") from err
    world = cfg.dist.world_size
    if graph.num_nodes < world:
        raise ConfigError(f"dataset {graph.name} has {graph.num_nodes} vertices, fewer than "
                          f"dist.world_size={world} ranks: use at most {graph.num_nodes} ranks")
    task = build_task(cfg)
    graph = task.prepare(graph, cfg.data_root, cfg.seed)  # processed once, here
    strategy_class(cfg).check(cfg, Checked.build(cfg, graph, task))


def build_task(cfg: DictConfig):
    """The task of ``cfg`` (node classification when the config names none)."""
    from gnnscale import registry
    from gnnscale.tasks.node import NodeTask

    if cfg.get("task") is None:
        return NodeTask()
    try:
        return registry.build(cfg.task)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"task: {err}") from err


def validate(cfg: DictConfig) -> None:
    """The one validation pass, in the launcher before any rank starts: the config's own
    checks, then the dataset (processed once here), then every component and the strategy."""
    check_config(cfg)
    cls = strategy_class(cfg)
    if getattr(cls, "meta", False):  # checks its own keys; each candidate is validated alone
        cls.check(cfg)
        return
    check_data(cfg, open_dataset(cfg))
