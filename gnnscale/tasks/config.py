"""What a task declares and refuses, torch-free: the base of every task's schema.

Each task's ``tasks/<name>/config.py`` holds its typed schema, a subclass of
:class:`TaskConfig` (as a strategy's ``strategies/<name>/config.py`` subclasses
``StrategyConfig``). Besides the options (dataclass fields), the class declares what the task
is: what it needs of a dataset (:attr:`~TaskConfig.needs`), whether it derives its own data
from it in the launcher (:attr:`~TaskConfig.derives_data`), the metrics it reports
(:attr:`~TaskConfig.metrics`, :attr:`~TaskConfig.auto_metric`), how each per-epoch figure it
adds to a rank's metrics combines over the ranks (:attr:`~TaskConfig.reductions`), whether
``strategy=auto`` can rank strategies on it (:attr:`~TaskConfig.auto_rankable`) and whether it
trains from a partitioned layout (:attr:`~TaskConfig.from_parts`). The launcher
(``runner/validate.py``), the strategies' checks and the runner read these without importing
torch; the task class (``tasks/base.py``) names its declarations with ``Task.schema``.

The launcher runs the checks in order:

1. :meth:`~gnnscale.schema.Options.check` on the task's own options;
2. :meth:`TaskConfig.check_config`: against the rest of the config (``metric=``), before the
   dataset is read;
3. :meth:`TaskConfig.check_data`: against the dataset's metadata (``meta.json``, or the
   prepared graph's when the task derives its data), from the strategy's own ``check_data``,
   which says how many ranks each need a training item of their own;
4. when the task derives its data, the task class's ``check`` on the prepared graph (imports
   torch).

A check raises :class:`~gnnscale.errors.ConfigError` naming the key to change.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from gnnscale import registry
from gnnscale.data.metadata import DatasetMeta, lacks_message
from gnnscale.errors import ConfigError
from gnnscale.schema import Options, Reduce, declared_along

#: The option a config without a ``task`` group trains (node classification).
DEFAULT = "node"


@dataclass
class TaskConfig(Options):
    """Base of a task's schema: its declarations (class attributes) and launcher checks (class
    methods). Fields are the task's options."""

    #: The option name (``task=<name>``), for messages.
    name: ClassVar[str] = ""
    #: What it is, in words (``node classification``), for messages.
    title: ClassVar[str] = ""
    #: The parts of a dataset it needs (keys of :data:`gnnscale.data.metadata.PARTS`:
    #: ``features``, ``labels``, ``train_split``).
    needs: ClassVar[tuple[str, ...]] = ()
    #: Whether it derives its own data from the dataset (link prediction: the edge split and
    #: the message graph): the launcher prepares it once, before any rank starts (imports
    #: torch), and checks the prepared graph; else it reads only the dataset's ``meta.json``.
    derives_data: ClassVar[bool] = False
    #: The metrics ``metric=`` may name; each is reported as ``val_<m>`` and ``test_<m>`` (or
    #: as variants ``val_<m>@K``), beside ``val_loss``, identical on every rank.
    metrics: ClassVar[tuple[str, ...]] = ()
    #: ``metric=auto``: the first of these the evaluation reported, else the last.
    auto_metric: ClassVar[tuple[str, ...]] = ()
    #: How each per-epoch figure it adds to a rank's metrics combines over the reporting ranks
    #: (a subclass adds to its bases'; see :meth:`metric_reductions`).
    reductions: ClassVar[Mapping[str, Reduce]] = {}
    #: Whether ``strategy=auto`` can rank strategies on it: it compares how fast each lowers
    #: the task's training loss (the task class's ``initial_loss`` and ``loss``), which must
    #: mean the same under every strategy (False: e.g. a loss whose scale depends on the
    #: batch). Node classification and link prediction are.
    auto_rankable: ClassVar[bool] = True
    #: Whether it trains from a partitioned layout (``parts=``, read by a strategy that
    #: declares ``from_parts``); when not, :attr:`parts_reason` says why, for the refusal.
    from_parts: ClassVar[bool] = False
    parts_reason: ClassVar[str] = "it is not trained from parts= yet"
    _target_: str = ""

    @classmethod
    def metric_reductions(cls) -> dict[str, Reduce]:
        """Its :attr:`reductions` merged with its bases'."""
        return declared_along(cls, "reductions")

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        """Its columns of the summary table: ``val_loss``, then ``val_<m>``, ``test_<m>`` of
        each of its :attr:`metrics`."""
        return ("val_loss", *(f"{split}_{m}" for m in cls.metrics for split in ("val", "test")))

    @classmethod
    def output_width(cls, node: Any, num_classes: int) -> int:
        """The model's output width under this task's options ``node`` (``cfg.task``, or the
        plain dict a finished run's config holds) on a graph of ``num_classes`` classes (what
        the task class's ``out_channels`` gives, for the cost model); default the classes."""
        return int(num_classes)

    @classmethod
    def parts_problem(cls) -> str | None:
        """Why it cannot train from ``parts=`` (None: it can), naming the tasks that can."""
        if cls.from_parts:
            return None
        able = sorted(f"task={name}" for name, schema in registry.schemas("task").items()
                      if getattr(schema, "from_parts", False))
        return (f"task={cls.name} cannot train from parts=: {cls.parts_reason}; use "
                f"{' or '.join(able) or 'no parts='}, or drop parts=")

    @classmethod
    def check_config(cls, cfg: Any) -> None:
        """Refuse what the config alone rules out: a ``metric=`` that is not one of its own."""
        metric = str(getattr(cfg.get("metric", "auto"), "value", cfg.get("metric", "auto")))
        if metric != "auto" and metric not in cls.metrics:
            raise ConfigError(f"metric={metric} is not a metric of task={cls.name}: use "
                              f"metric=auto or one of {', '.join(cls.metrics)}")

    @classmethod
    def check_data(cls, cfg: Any, meta: DatasetMeta, ranks: int = 1) -> None:
        """Refuse a dataset it cannot train on (``meta``: its metadata) when each of ``ranks``
        ranks needs a training item of its own: by default, one that lacks what it
        :attr:`needs`."""
        missing = meta.lacks(cls.needs)
        if missing:
            raise ConfigError(lacks_message(meta.name, missing, cls.title, cls.needs))


def declared_task(cfg: Any) -> type[TaskConfig]:
    """The declarations of ``cfg``'s task (``cfg.task``; node classification when the config
    has none), torch-free where they are: its registered schema; else a :class:`TaskConfig`
    subclass with the same ``_target_`` in the ``config`` module beside the class's module
    (the layout of ``tasks/<name>/``); else the class itself is imported and its ``schema``
    read."""
    node = cfg.get("task") if hasattr(cfg, "get") else None
    if node is None:
        return registry.schemas("task")[DEFAULT]
    schema = registry.schema_of("task", node)
    if isinstance(schema, type) and issubclass(schema, TaskConfig):
        return schema
    target = str(node.get("_target_") or "")
    module = target.rpartition(".")[0]
    package = module.rpartition(".")[0]
    for where in (f"{package}.config", f"{module}.config"):  # the class in its module, or
        try:  # exported by its package
            found = importlib.util.find_spec(where) if where != ".config" else None
        except (ImportError, ValueError):
            found = None
        if found is not None:
            for obj in vars(importlib.import_module(where)).values():
                if (isinstance(obj, type) and issubclass(obj, TaskConfig)
                        and getattr(obj, "_target_", None) == target):
                    return obj
    if not target:
        raise ConfigError("task has no _target_: give task=node or task=link")
    from hydra.utils import get_object

    return get_object(target).schema
