"""``strategy=offload``: full-graph training from host memory in 2-level chunks (HongTu)."""

from gnnscale.strategies.offload.strategy import Offload, OffloadConfig

__all__ = ["Offload", "OffloadConfig"]
