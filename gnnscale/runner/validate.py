"""Checks on a composed config (and its dataset) that turn bad values into clear errors,
in the launching process, before any rank starts."""

from __future__ import annotations

from omegaconf import DictConfig

from gnnscale.data.graph import GraphStore


class ConfigError(ValueError):
    """A config value that cannot work; the message says which key to change and how."""


def check_config(cfg: DictConfig) -> None:
    """Checks that need no data."""
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


def check_data(cfg: DictConfig, graph: GraphStore) -> None:
    """Checks that need the loaded dataset: the strategy's own (see ``Strategy.check``), then
    every component built once from its config, so a bad value fails here, not in a rank."""
    from gnnscale import registry
    from gnnscale.distributed.launch import private_temp_dir

    strategy_class(cfg).check(cfg, graph)
    for group in ("sampler", "cache", "deps", "optim"):
        if cfg.get(group) is not None:
            try:
                registry.build(cfg[group])
            except (ValueError, TypeError) as err:
                raise ConfigError(f"{group}: {err}") from err
    try:
        with private_temp_dir():  # PyG writes its generated modules to the temp folder
            registry.build(cfg.model, in_channels=graph.num_features,
                           out_channels=graph.num_classes)
    except (ValueError, TypeError, RuntimeError) as err:
        raise ConfigError(f"model: {err}") from err
