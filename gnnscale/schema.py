"""Typed schema of the top-level config (the groups are typed by their own options),
:class:`Options`, the base of every option's schema, the checks options share
(:func:`require_at_least`, :func:`require_range`, :func:`require_one_of`), and what a task's
or a strategy's declarations use for their metrics (:class:`Reduce`,
:func:`declared_along`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import II, MISSING

from gnnscale.errors import ConfigError


class Options:
    """Base of an option's typed schema (a dataclass in a torch-free ``schemas.py`` or
    ``config.py``). :meth:`check` refuses values the option cannot run with a
    :class:`~gnnscale.errors.ConfigError` naming the key: the launcher calls it on the composed
    config before anything heavy is imported, and the implementation's constructor calls it on
    its arguments, so both refuse the same values with the same message."""

    def check(self) -> None:
        """Raise ``ConfigError`` for a value this option cannot run (default: none)."""


def require_at_least(key: str, value: Any, low: Any, note: str = "") -> None:
    """Refuse ``value < low``: ``<key> must be >= <low><note>, got <value>`` (``note``: what
    the key means, e.g. ``" (0: automatic)"``)."""
    if value < low:
        raise ConfigError(f"{key} must be >= {low}{note}, got {value}")


def require_range(key: str, value: Any, low: Any, high: Any, *, closed: bool = False,
                  note: str = "") -> None:
    """Refuse a ``value`` outside ``[low, high)`` (``[low, high]`` when ``closed``):
    ``<key> must lie in [<low>, <high>)<note>, got <value>``."""
    if not (low <= value <= high if closed else low <= value < high):
        end = "]" if closed else ")"
        raise ConfigError(f"{key} must lie in [{low}, {high}{end}{note}, got {value}")


def require_one_of(key: str, value: Any, choices: Any, note: str = "") -> None:
    """Refuse a ``value`` not among ``choices``: ``<key> must be one of <choices><note>, got
    <value!r>``."""
    if value not in choices:
        raise ConfigError(f"{key} must be one of {choices}{note}, got {value!r}")


class Reduce(str, Enum):
    """How a per-epoch metric combines over the reporting ranks (``reductions`` of a task's or
    a strategy's declarations; runner/metrics.py applies them)."""

    max = "max"  # the largest rank's (the slowest rank's time, the largest peak)
    mean = "mean"  # the mean over ranks (each rank's phase seconds, ratios, the loss)
    sum = "sum"  # the total (counts, bytes, seconds summed over a role's ranks)


def declared_along(cls: type, attr: str) -> dict:
    """What ``cls`` and its bases declare in the class attribute ``attr`` (a mapping, or a
    sequence read as the keys of one), merged from the farthest base on: a subclass adds to
    its bases' declarations and may override one, without restating them."""
    out: dict = {}
    for klass in reversed(cls.__mro__):
        own = vars(klass).get(attr) or {}
        out.update(own if isinstance(own, Mapping) else dict.fromkeys(own))
    return out


class Select(str, Enum):
    """The epoch a run reports (runner/selection.py)."""

    metric = "metric"
    loss = "loss"
    last = "last"


class StopRule(str, Enum):
    """When a run stops before ``epochs`` (runner/selection.py)."""

    none = "none"
    patience = "patience"
    window = "window"


class Metric(str, Enum):
    """The metric reported first (and selecting the epoch under ``select=metric``)."""

    auto = "auto"  # task=node: rocauc for binary tasks, else acc; task=link: auc
    acc = "acc"
    rocauc = "rocauc"
    macro_f1 = "macro_f1"  # task=node: the mean F1 over the classes (HGB's Macro-F1)
    micro_f1 = "micro_f1"  # task=node: F1 of all decisions pooled (one label: the accuracy)
    auc = "auc"  # task=link: ROC-AUC of the scored pairs
    ap = "ap"  # task=link: average precision
    hits = "hits"  # task=link: Hits@K of the first task.hits_k
    mrr = "mrr"  # task=link: mean reciprocal rank


@dataclass
class EarlyStopConfig:
    """Stop before ``epochs`` by the validation loss (runner/selection.py)."""

    rule: StopRule = StopRule.none  # patience (Shchur et al.) | window (Kipf & Welling)
    patience: int = 0  # evaluations


@dataclass
class RootConfig:
    """The top-level config: one option per group, then the run's own keys."""

    task: Any = MISSING
    dataset: Any = MISSING
    model: Any = MISSING
    sampler: Any = MISSING
    partitioner: Any = MISSING
    cache: Any = MISSING
    deps: Any = MISSING
    strategy: Any = MISSING
    optim: Any = MISSING
    dist: Any = MISSING
    logger: Any = MISSING
    experiment: Any = None
    seed: int = 0
    # left out: the strategy's declared default (StrategyConfig.default_epochs, resolved by
    # the ``gnnscale.default_epochs`` resolver, registered beside the strategies'
    # declarations in strategies/config.py: 3 for the mini-batch strategies, more for
    # full-graph ones, whose epoch is one optimizer step)
    epochs: int = II("gnnscale.default_epochs:")
    eval_every: int = 1  # 0: evaluate only after the last epoch; -1: never (training only)
    eval_batch_size: int = 4096
    metric: Metric = Metric.auto
    select: Select = Select.metric  # the epoch reported: best val metric | lowest val loss | last
    early_stop: EarlyStopConfig = field(default_factory=EarlyStopConfig)
    resume: bool = False
    checkpoint: bool = True
    data_root: str = "${oc.env:GNNSCALE_DATA,data}"
    run_dir: str = "${hydra:runtime.output_dir}"
    progress: bool = True  # a progress bar per epoch (on a terminal only)
    # the routine lines (per epoch, the summary table) on the terminal; train.log in the run
    # folder holds them either way. null: as progress (gnnscale.train sets it: quiet)
    verbose: bool | None = None
    footprint: bool = False  # report footprint_similarity (FGNN Table 2) per epoch from epoch 1
    # a partitioned layout (python -m gnnscale.partition ... parts=DIR): rank r reads its
    # part-<r> folder there instead of the whole dataset (docs/distributed.md)
    parts: str | None = None


ConfigStore.instance().store(group="schema", name="root", node=RootConfig)
