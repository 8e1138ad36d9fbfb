"""``strategy=auto``'s typed schema (torch-free: the launcher composes and checks with it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from gnnscale.registry import register


class Criterion(str, Enum):
    """What time the choice rule divides by the loss decrease per epoch."""

    measured = "measured"  # median measured epoch time of the profile
    modelled = "modelled"  # the cost model's projected epoch time on strategy.hardware


@register("strategy", "auto")
@dataclass
class AutoConfig:
    """``strategy=auto``'s options."""

    _target_: str = "gnnscale.strategies.auto.Auto"
    candidates: list[str] = field(default_factory=list)  # empty: every registered candidate
    profile_epochs: int = 3  # epochs each candidate trains; the first is a warm-up
    criterion: Criterion = Criterion.measured
    hardware: str | None = None  # configs/hardware/<name> (criterion=modelled)
    batch_size: int | None = None  # global mini-batch of the sampling candidates (null: theirs)
    # when the two best scores are closer than rematch_within (or than either one's own
    # epoch-time spread), both train rematch_rounds more profiles, alternating (0: never)
    rematch_rounds: int = 2
    rematch_within: float = 0.10
    options: dict[str, Any] = field(default_factory=dict)  # {candidate: {key: value}}
