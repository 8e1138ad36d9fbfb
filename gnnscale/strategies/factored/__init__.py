"""``strategy=factored``: sampler ranks and trainer ranks joined by a queue (GNNLab/FGNN)."""

from gnnscale.strategies.factored.config import FactoredConfig

__all__ = ["Factored", "FactoredConfig"]


def __getattr__(name: str):
    """``Factored`` on first use: its module imports torch, the config (above) does not."""
    if name == "Factored":
        from gnnscale.strategies.factored.strategy import Factored

        return Factored
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
