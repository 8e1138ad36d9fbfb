"""``strategy=auto``: profile the registered strategies that accept a config, train the best."""

from gnnscale.strategies.auto.config import AutoConfig

__all__ = ["Auto", "AutoConfig"]


def __getattr__(name: str):
    """``Auto`` on first use: its module imports torch, the config (above) does not."""
    if name == "Auto":
        from gnnscale.strategies.auto.strategy import Auto

        return Auto
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
