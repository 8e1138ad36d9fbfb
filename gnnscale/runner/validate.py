"""Checks on a composed config and its dataset that turn bad values into clear errors."""

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
    if cfg.lr <= 0:
        raise ConfigError(f"lr must be > 0, got {cfg.lr}")
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
    world = cfg.dist.world_size
    if cfg.batch_size < world:
        raise ConfigError(f"batch_size={cfg.batch_size} is smaller than dist.world_size="
                          f"{world}: every rank needs at least one target per step")


def check_data(cfg: DictConfig, graph: GraphStore, world_size: int) -> None:
    """Checks that need the loaded dataset."""
    if graph.x is None or graph.y is None or graph.train_idx is None:
        raise ConfigError(f"dataset {graph.name} lacks features, labels or a training split")
    n_train = graph.train_idx.numel()
    if n_train < world_size:
        raise ConfigError(
            f"the training set of {graph.name} has {n_train} vertices but dist.world_size="
            f"{world_size}: use at most {n_train} ranks"
        )
