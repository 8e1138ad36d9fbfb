"""``strategy=auto``: profile the registered strategies that accept a config, train the best."""

from gnnscale.strategies.auto.strategy import Auto, AutoConfig

__all__ = ["Auto", "AutoConfig"]
