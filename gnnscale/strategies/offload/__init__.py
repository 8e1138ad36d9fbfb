"""``strategy=offload``: full-graph training from host memory in 2-level chunks (HongTu)."""

from gnnscale.strategies.offload.config import OffloadConfig

__all__ = ["Offload", "OffloadConfig"]


def __getattr__(name: str):
    """``Offload`` on first use: its module imports torch, the config (above) does not."""
    if name == "Offload":
        from gnnscale.strategies.offload.strategy import Offload

        return Offload
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
