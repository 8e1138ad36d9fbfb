"""``strategy=fullgraph``'s typed schema, declarations and launcher checks (torch-free;
``FullGraph`` takes its declarations from here, and runs :func:`check_combination` again on
the built model and deps manager at set-up)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.schema import Reduce
from gnnscale.strategies.config import Checked, StrategyConfig, partition_kind

EDGE_CUTS = "partitioner=metis|random|range|ldg|fennel"


def _option(obj: Any) -> str:
    """The option name of a built component or of its schema (``Hybrid``, ``HybridConfig``:
    ``hybrid``)."""
    return type(obj).__name__.lower().removesuffix("config")


def check_combination(kind: str, deps: Any, model: Any, feature_dim: int | None,
                      partitioner: str) -> None:
    """Refuse, before training, what full-graph training cannot run (the key to change).

    ``deps`` and ``model`` are the built manager and model, or their schemas (both answer
    ``replicates_all``, ``replicates_none``, ``budget_bytes()``, ``why_not_splittable()``,
    ``why_not_whole_graph()``);
    ``feature_dim`` None skips the budget check (the dataset is not read yet)."""
    if kind == "vertex_cut":
        if not deps.replicates_none:
            raise ConfigError(
                f"strategy=fullgraph on a vertex-cut (partitioner={partitioner}) synchronises "
                f"masters and mirrors: it runs with deps=depcomm only, got "
                f"deps={_option(deps)}. deps=depcache|hybrid run on edge-cuts ({EDGE_CUTS})")
        why = model.why_not_splittable()
        if why is not None:
            raise ConfigError(f"{why}: a vertex-cut (partitioner={partitioner}) needs a model "
                              "split into aggregate and update (model=sage|gcn|gin); run "
                              f"model={_option(model)} on an edge-cut ({EDGE_CUTS})")
    why = model.why_not_whole_graph()
    if why is not None:
        raise ConfigError(f"strategy=fullgraph: {why}")
    budget = deps.budget_bytes()
    if kind == "edge_cut" and feature_dim is not None and not (
            deps.replicates_all or deps.replicates_none) \
            and budget is not None and budget < 4 * feature_dim:
        raise ConfigError(f"deps.memory_cap_mb gives a budget of {budget} bytes, less than one "
                          f"replicated feature row ({4 * feature_dim} bytes): raise "
                          "deps.memory_cap_mb, or use deps=depcomm to replicate nothing")


@register("strategy", "fullgraph")
@dataclass
class FullGraphConfig(StrategyConfig):
    """``strategy=fullgraph``'s options: every rank owns a part, whole-graph epochs."""

    name: ClassVar[str] = "fullgraph"
    samples: ClassVar[bool] = False
    #: one optimizer step per epoch: 20 reach data's accuracy of 3 mini-batch epochs on the
    #: default dataset (README's commands; docs/choosing-a-strategy.md)
    default_epochs: ClassVar[int] = 20
    layer_by_layer: ClassVar[bool] = True
    reads: ClassVar[tuple[str, ...]] = ("deps", "partition")
    default_deps: ClassVar[str] = "hybrid"  # NeutronStar's cost model
    default_cache: ClassVar[str] = "none"
    trains_types: ClassVar[bool] = True  # typed inputs encoded, sparse gradients summed
    #: parts=: a part's own rows and in-edges, with deps=depcomm (see parts_problem)
    from_parts: ClassVar[bool] = True
    #: DepComm's rows and gradients (``bytes_forward`` + ``bytes_backward``)
    exchange_keys: ClassVar[tuple[str, ...]] = ("bytes_rank_to_rank",)
    takes_edge_features: ClassVar[bool] = True  # each block's rows, gathered at set-up
    reductions: ClassVar[dict[str, Reduce]] = {
        "edge_skew": Reduce.max,  # the busiest part's
        # per rank: each holds the whole tables, and looks up the rows it reads
        "embedding_rows_held": Reduce.max, "embedding_bytes": Reduce.max,
        "embedding_rows_touched": Reduce.mean,
        "bytes_edge_features": Reduce.sum}  # the edge feature rows the ranks hold
    columns: ClassVar[tuple[str, ...]] = ("edge_skew",)
    _target_: str = "gnnscale.strategies.fullgraph.FullGraph"
    ring: bool = False  # peer-ordered point-to-point exchange instead of one all-to-all
    # exchanges overlap the local aggregation, forward and backward (faster on every
    # benchmarked row that exchanges rows; false: each exchange awaited before its conv)
    overlap: bool = True

    @classmethod
    def preferred(cls, cfg: Any) -> dict[str, str]:
        """NeutronStar's hybrid on an edge-cut; depcomm (the only deps) on a vertex-cut."""
        return {"deps": "depcomm" if partition_kind(cfg) != "edge_cut" else "hybrid",
                "cache": "none"}

    @classmethod
    def parts_problem(cls, cfg: Any, built: Checked) -> str | None:
        """A part holds its own rows and in-edges only: deps must replicate none (depcomm)."""
        if built.deps is None or not type(built.deps).replicates_none:
            return ("parts= holds each rank's own rows and in-edges only, so fullgraph needs "
                    "deps=depcomm (depcache and hybrid replicate rows of other parts): set "
                    "deps=depcomm")
        return super().parts_problem(cfg, built)

    @classmethod
    def check_config(cls, cfg: Any, built: Checked) -> None:
        """The partition kind, deps and model combinations full-graph training can run."""
        super().check_config(cfg, built)
        cls._combination(cfg, built, None)

    @classmethod
    def check_data(cls, cfg: Any, built: Checked) -> None:
        """The shared checks, and a deps budget that holds one replicated feature row."""
        super().check_data(cfg, built)
        cls._combination(cfg, built, built.graph.num_features)

    @classmethod
    def _combination(cls, cfg: Any, built: Checked, feature_dim: int | None) -> None:
        name = str(cfg.partitioner._target_).rsplit(".", 1)[-1]
        name = name.replace("Partitioner", "").lower()
        if cfg.dist.world_size > 1:
            check_combination(partition_kind(cfg), built.deps, built.model, feature_dim, name)
        elif built.model.why_not_whole_graph() is not None:
            check_combination("edge_cut", built.deps, built.model, feature_dim, name)
