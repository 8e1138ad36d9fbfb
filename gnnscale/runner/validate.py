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


def strategy_class(cfg: DictConfig) -> type:
    """The strategy class ``cfg.strategy._target_`` names."""
    from hydra.utils import get_object

    return get_object(cfg.strategy._target_)


def check_data(cfg: DictConfig, graph: GraphStore) -> None:
    """Checks that need the loaded dataset: the strategy's own (see ``Strategy.check``), then
    every component built once from its config, so a bad value fails here, not in a rank."""
    from gnnscale import registry

    strategy_class(cfg).check(cfg, graph)
    for group in ("sampler", "cache", "deps", "optim"):
        if cfg.get(group) is not None:
            try:
                registry.build(cfg[group])
            except (ValueError, TypeError) as err:
                raise ConfigError(f"{group}: {err}") from err
    try:
        registry.build(cfg.model, in_channels=graph.num_features, out_channels=graph.num_classes)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"model: {err}") from err
