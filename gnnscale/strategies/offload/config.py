"""``strategy=offload``'s typed schema and closed choices (torch-free: the launcher composes
and checks with it)."""

from __future__ import annotations

from dataclasses import dataclass

from gnnscale.registry import register

#: how a part is cut into chunks (:mod:`.chunks`)
LEVEL2 = ("range", "metis")
#: which rows a batch loads once (:mod:`.transfers`)
DEDUP = ("none", "inter", "inter+intra")
#: what backward does with a layer's intermediate (:mod:`.compute`)
INTERMEDIATE = ("cache", "recompute", "auto")


@register("strategy", "offload")
@dataclass
class OffloadConfig:
    """``strategy=offload``'s options."""

    _target_: str = "gnnscale.strategies.offload.Offload"
    chunks: int = 8                     # chunks per part; batch b = chunk b of every part
    dedup: str = "inter+intra"          # none | inter | inter+intra
    reorganize: bool = False            # HongTu's Algorithm 4 before training
    level2: str = "range"               # range (id ranges) | metis (METIS inside each part)
    intermediate: str = "auto"          # cache | recompute | auto (per layer)
    device_budget_gb: float | None = None  # refuse a plan whose device bound exceeds it
