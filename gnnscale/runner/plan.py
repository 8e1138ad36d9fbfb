"""The checked run as one value: :class:`RunPlan`, built once by the launcher
(:func:`gnnscale.runner.validate.validate`) and read by everything after it.

A plan holds what the checks decided about a config, so nothing after them asks the config
again: the declarations of its strategy and its task (``strategies/<name>/config.py``,
``tasks/<name>/config.py``), their options as checked instances, the model's and the deps
manager's schemas and the dataset's metadata (:class:`~gnnscale.strategies.config.Checked`),
the model options the strategy settled (``model.gcn_norm=auto``, ...) and the partitioned
layout it trains from (``parts=``). It is frozen and torch-free (importing this module imports
no torch), and it pickles: the launcher hands it to every rank with the settled config.

It is also the one builder of a run's task, graph and model (:meth:`RunPlan.build`): the ranks
(:func:`gnnscale.runner.worker.build_context`), a finished run's loader for ``embed``,
``predict`` and :func:`gnnscale.load_run` (:meth:`RunPlan.from_run`, :meth:`RunPlan.load`)
build through it. It calls the strategies' contract module's two steps
(:func:`gnnscale.strategies.base.build_task`, :func:`~gnnscale.strategies.base.build_model`),
which the launcher-side builds of the strategy layer (``offload``'s plan of every rank's chunks,
``auto``'s initial losses), which cannot import the runner, call with the same settled config.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from gnnscale import registry
from gnnscale.data.metadata import DatasetMeta
from gnnscale.strategies.config import Checked, StrategyConfig, declared
from gnnscale.tasks.config import TaskConfig, declared_task

if TYPE_CHECKING:
    from gnnscale.runner.finished import FinishedRun


@dataclass(frozen=True)
class Built:
    """What :meth:`RunPlan.build` builds: the task, the graph it trains on (link prediction:
    the message graph) and the model with the task's head, in its initial parameters."""

    task: Any
    graph: Any
    model: Any


@dataclass(frozen=True)
class RunPlan:
    """A checked run (see the module docstring). ``config`` is the settled config (a copy of
    its own once :func:`~gnnscale.runner.validate.validate` returns it);
    ``strategy`` and ``task`` the declarations classes, ``strategy_options`` and
    ``task_options`` their checked instances; ``checked`` the model's and deps manager's
    schemas and the dataset's metadata (``checked.graph``: None before the data is read, and
    for a meta strategy, whose candidates are each planned alone); ``settled``:
    ``{"model.<key>": value}`` the strategy chose; ``run``: the finished run it was read from
    (:meth:`from_run`), else None."""

    config: DictConfig
    strategy: type[StrategyConfig]
    task: type[TaskConfig]
    strategy_options: StrategyConfig | None
    task_options: TaskConfig | None
    checked: Checked
    settled: Mapping[str, Any] = field(default_factory=dict)
    run: FinishedRun | None = None

    # -- building the value ------------------------------------------------------------------
    @classmethod
    def of(cls, cfg: Any, settled: Mapping[str, Any] | None = None,
           meta: DatasetMeta | None = None, strategy: type[StrategyConfig] | None = None,
           task: type[TaskConfig] | None = None) -> RunPlan:
        """The plan of the settled ``cfg`` (its declarations read here, once; ``strategy`` and
        ``task`` when the caller has read them already); ``meta``: its dataset's metadata,
        when read. Runs no check: :func:`gnnscale.runner.validate.validate` builds a checked
        one, a finished run's (:meth:`from_run`) comes from a config the run was checked
        with."""
        strategy = strategy or declared(cfg.strategy)
        task = task or declared_task(cfg)
        return cls(config=frozen_config(cfg), strategy=strategy, task=task,
                   strategy_options=registry.instance(strategy, cfg.strategy),
                   task_options=registry.instance(task, cfg.get("task")),
                   checked=Checked.build(cfg, meta), settled=dict(settled or {}))

    def with_meta(self, meta: DatasetMeta) -> RunPlan:
        """This plan with its dataset's metadata (``meta``: a graph's or a layout's)."""
        return replace(self, checked=replace(self.checked, graph=meta, loaded=None))

    @classmethod
    def from_run(cls, run_dir: Any, data_root: str | None = None,
                 need_checkpoint: bool = True) -> RunPlan:
        """The plan of the finished run in ``run_dir``: its config as
        :meth:`gnnscale.runner.finished.FinishedRun.from_run` reads it (every group rebuilt
        through the typed schemas: a config from a file never chooses what is imported), with
        ``data_root`` replacing the run's when its dataset moved."""
        from gnnscale.runner.finished import FinishedRun

        run = FinishedRun.from_run(run_dir, data_root, need_checkpoint)
        return replace(cls.of(run.config), run=run)

    # -- what it says ------------------------------------------------------------------------
    @property
    def meta(self) -> DatasetMeta | None:
        """The dataset's metadata (None before it is read)."""
        return self.checked.graph

    @property
    def parts(self) -> str | None:
        """The partitioned layout it trains from (``parts=``), else None."""
        parts = self.config.get("parts")
        return str(parts) if parts else None

    @property
    def world_size(self) -> int:
        """The ranks that train it."""
        return int(self.config.dist.world_size)

    def built(self, loaded: Any = None) -> Checked:
        """:attr:`checked` with ``loaded``, the graph a launcher's check reads
        (``StrategyConfig.checks_built``); the plan itself keeps no graph."""
        return replace(self.checked, loaded=loaded)

    def config_dict(self) -> dict:
        """The settled config as plain values (what a rank rebuilds its config from)."""
        return OmegaConf.to_container(self.config, resolve=True, enum_to_str=True)  # type: ignore[return-value]

    # -- the one builder ---------------------------------------------------------------------
    def build_task(self, graph: Any = None) -> tuple[Any, Any]:
        """The run's task and the graph it trains on (link prediction: the message graph,
        processed once and stored), from ``graph`` when given (a rank's part of a
        partitioned layout, or a dataset already loaded), else the dataset's."""
        from gnnscale.strategies.base import build_task

        return build_task(self.config, graph)

    def build_model(self, graph: Any, task: Any, private_temp: bool = False) -> Any:
        """The model with the task's head in its initial parameters (seeded by ``seed``: the
        same in every context); ``private_temp``: PyG's generated modules written to a temp
        folder of their own (a launcher's build)."""
        from gnnscale.strategies.base import build_model

        return build_model(self.config, graph, task, private_temp=private_temp)

    def build(self, graph: Any = None, private_temp: bool = False) -> Built:
        """The task, the graph it trains on and the model (:meth:`build_task`, then
        :meth:`build_model`)."""
        task, prepared = self.build_task(graph)
        return Built(task, prepared, self.build_model(prepared, task, private_temp))

    def load(self) -> tuple[Any, Any, Any]:
        """A finished run's ``(graph, model, task)`` (only on a plan from :meth:`from_run`):
        built by the one builder, with the checkpoint's weights, in eval mode
        (:meth:`gnnscale.runner.finished.FinishedRun.load`)."""
        if self.run is None:
            from gnnscale.errors import UserError

            raise UserError("this plan is not a finished run's (RunPlan.from_run): it has no "
                            "checkpoint to load")
        return self.run.load()


def frozen_config(cfg: Any) -> DictConfig:
    """A copy of ``cfg`` of its own (a plan's config: what the launcher changes in its own
    config after the checks does not reach it)."""
    return copy.deepcopy(cfg) if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
