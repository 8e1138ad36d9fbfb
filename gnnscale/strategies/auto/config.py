"""``strategy=auto``'s typed schema, declarations and launcher checks (torch-free: the
launcher composes and checks with it, reading each candidate's declarations through the
registry)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar

from gnnscale.distributed.schemas import under_torchrun
from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.strategies.auto.candidates import candidates
from gnnscale.strategies.config import Checked, StrategyConfig
from gnnscale.tasks.config import declared_task


class Criterion(str, Enum):
    """What time the choice rule divides by the loss decrease per epoch."""

    measured = "measured"  # median measured epoch time of the profile
    modelled = "modelled"  # the cost model's projected epoch time on strategy.hardware


@register("strategy", "auto")
@dataclass
class AutoConfig(StrategyConfig):
    """``strategy=auto``'s options: a meta strategy, resolved in the launcher into profile runs
    and one chosen run."""

    name: ClassVar[str] = "auto"
    meta: ClassVar[bool] = True
    auto_candidate: ClassVar[bool] = False
    #: a typed graph is profiled under the candidates that train types (the others refused)
    trains_types: ClassVar[bool] = True
    _target_: str = "gnnscale.strategies.auto.Auto"
    candidates: list[str] = field(default_factory=list)  # empty: every registered candidate
    profile_epochs: int = 3  # epochs each candidate trains; the first is a warm-up
    # each profiled epoch of a sampling candidate cut to its first profile_steps mini-batches
    # (null: whole epochs, the default: a cut epoch ranks less surely; a full-graph epoch is
    # one step already)
    profile_steps: int | None = None
    # the profiling budget: at most profile_s seconds of the ranks' profiling (null: none),
    # else profile_share of the whole run (null: none): no new candidate starts once profiling
    # has taken profile_share / (1 - profile_share) of the best candidate's projected training
    profile_s: float | None = None
    profile_share: float | None = 0.2
    criterion: Criterion = Criterion.measured
    hardware: str | None = None  # configs/hardware/<name> (criterion=modelled)
    batch_size: int | None = None  # global mini-batch of the sampling candidates (null: theirs)
    # when the two best scores are closer than rematch_within (or than either one's own
    # epoch-time spread), both train rematch_rounds more profiles, alternating (0: never)
    rematch_rounds: int = 2
    rematch_within: float = 0.10
    options: dict[str, Any] = field(default_factory=dict)  # {candidate: {key: value}}

    @classmethod
    def check_config(cls, cfg: Any, built: Checked) -> None:
        """A task it can rank (one whose declarations say its training loss means the same
        under every strategy), and its own keys (its candidates are checked one by one when
        profiled)."""
        task = declared_task(cfg)
        if not task.auto_rankable:
            raise ConfigError(f"strategy=auto ranks candidates by how fast they lower the "
                              f"training loss, which task={task.name} declares not comparable "
                              "between strategies (auto_rankable = False): pick a strategy "
                              "(strategy=data|split|factored|fullgraph|offload)")
        check_auto(cfg)


def chosen_candidates(cfg: Any) -> list[str]:
    """``strategy.candidates``, or every registered strategy that is a candidate."""
    known = candidates(cfg)
    given = list(cfg.strategy.candidates)
    if not given:
        return [name for name, why in known if why is None]
    names = {name for name, _ in known}
    bad = [c for c in given if c not in names or c == "auto"]
    if bad or len(set(given)) != len(given):
        raise ConfigError(f"strategy.candidates={given}: give distinct names among "
                          f"{sorted(n for n, why in known if why is None)}")
    return given


def check_auto(cfg: Any) -> None:
    """The auto config's own keys."""
    auto = cfg.strategy
    names = chosen_candidates(cfg)
    extra = [k for k in auto.options if k not in names]
    if extra:
        raise ConfigError(f"strategy.options names {extra}, which are not candidates "
                          f"({names})")
    if auto.profile_epochs < 2:
        raise ConfigError(f"strategy.profile_epochs must be >= 2 (a full-graph strategy's "
                          f"first epoch reports the initial parameters' loss: one epoch shows "
                          f"no decrease), got {auto.profile_epochs}")
    if auto.profile_steps is not None and auto.profile_steps < 1:
        raise ConfigError(f"strategy.profile_steps must be >= 1 (or null: whole epochs), got "
                          f"{auto.profile_steps}")
    if auto.profile_s is not None and auto.profile_s <= 0:
        raise ConfigError(f"strategy.profile_s must be > 0 seconds (or null: no cap), got "
                          f"{auto.profile_s}")
    if auto.profile_share is not None and not 0 < auto.profile_share < 1:
        raise ConfigError(f"strategy.profile_share must lie in (0, 1) (or null: profile every "
                          f"candidate), got {auto.profile_share}")
    if auto.rematch_rounds < 0 or auto.rematch_within < 0:
        raise ConfigError("strategy.rematch_rounds and strategy.rematch_within must be >= 0, "
                          f"got {auto.rematch_rounds} and {auto.rematch_within}")
    if auto.criterion == Criterion.modelled:
        from gnnscale.cost import ProfileError, load_profile

        if not auto.hardware:
            raise ConfigError("strategy.criterion=modelled projects onto a hardware profile: "
                              "set strategy.hardware=<name of configs/hardware/*.yaml>")
        try:
            load_profile(auto.hardware)
        except ProfileError as err:
            raise ConfigError(f"strategy.hardware: {err}") from err
    if under_torchrun():
        raise ConfigError("strategy=auto profiles its candidates from one launcher; under "
                          "torchrun run it on one host to pick, then launch the picked strategy")
