"""``strategy=fullgraph``'s typed schema (torch-free: the launcher composes and checks with it)."""

from __future__ import annotations

from dataclasses import dataclass

from gnnscale.registry import register


@register("strategy", "fullgraph")
@dataclass
class FullGraphConfig:
    """``strategy=fullgraph``'s options."""

    _target_: str = "gnnscale.strategies.fullgraph.FullGraph"
    ring: bool = False  # peer-ordered point-to-point exchange instead of one all-to-all
    overlap: bool = False  # convolve all-local destinations while remote rows are in flight
