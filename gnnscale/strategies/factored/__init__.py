"""``strategy=factored``: sampler ranks and trainer ranks joined by a queue (GNNLab/FGNN)."""

from gnnscale.strategies.factored.strategy import Factored, FactoredConfig

__all__ = ["Factored", "FactoredConfig"]
