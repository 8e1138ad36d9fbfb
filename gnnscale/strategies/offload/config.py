"""``strategy=offload``'s typed schema, closed choices, declarations and launcher checks
(torch-free; ``Offload`` takes its declarations from here and runs :func:`check_options` on
the built model)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.schema import Reduce, require_at_least
from gnnscale.strategies.config import Checked, StrategyConfig, partition_kind

#: how a part is cut into chunks (:mod:`.chunks`)
LEVEL2 = ("range", "metis")
#: which rows a batch loads once (:mod:`.transfers`)
DEDUP = ("none", "inter", "inter+intra")
#: what backward does with a layer's intermediate (:mod:`.compute`)
INTERMEDIATE = ("cache", "recompute", "auto")


def check_values(chunks: int, dedup: str, intermediate: str, budget: float | None,
                 level2: str = "range") -> None:
    """Refuse option values offloading cannot run (the key to change)."""
    require_at_least("strategy.chunks", chunks, 1)
    if level2 not in LEVEL2:
        raise ConfigError(f"strategy.level2 must be one of {', '.join(LEVEL2)}, got {level2!r}")
    if dedup not in DEDUP:
        raise ConfigError(f"strategy.dedup must be one of {', '.join(DEDUP)}, got {dedup!r}")
    if intermediate not in INTERMEDIATE:
        raise ConfigError(f"strategy.intermediate must be one of "
                          f"{', '.join(INTERMEDIATE)}, got {intermediate!r}")
    if budget is not None and budget <= 0:
        raise ConfigError(f"strategy.device_budget_gb must be > 0 (or null), got {budget}")


def check_options(chunks: int, dedup: str, intermediate: str, budget: float | None,
                  model: Any, level2: str = "range") -> None:
    """Refuse option values and model combinations offloading cannot run (key to change);
    ``model`` is the built model or its schema (both answer ``splittable``,
    ``why_not_splittable()``, ``why_not_whole_graph()``, ``linear_aggregate`` and
    ``batch_norm``)."""
    check_values(chunks, dedup, intermediate, budget, level2)
    if intermediate == "cache" and not model.splittable:
        raise ConfigError(f"strategy.intermediate=cache keeps aggregates, but "
                          f"{model.why_not_splittable()}: use strategy.intermediate=recompute "
                          "or auto")
    if intermediate == "cache" and not model.linear_aggregate:
        raise ConfigError("strategy.intermediate=cache backpropagates through the aggregate "
                          "without the source rows, but model.residual normalises them before "
                          "aggregating: use strategy.intermediate=recompute or auto")
    why = model.why_not_whole_graph()
    if why is not None:
        raise ConfigError(f"strategy=offload: {why}")
    if model.batch_norm:
        raise ConfigError("model.norm=batch normalises over each chunk, not the whole graph: "
                          "use model.norm=layer or none with strategy=offload")
    if getattr(model, "featureless", None) == "onehot":
        raise ConfigError("strategy=offload keeps layer 0's rows in host memory as float rows, "
                          "and model.featureless=onehot feeds layer 0 vertex ids: use "
                          "model.featureless=embedding, or strategy=data")


@register("strategy", "offload")
@dataclass
class OffloadConfig(StrategyConfig):
    """``strategy=offload``'s options: full-graph epochs in chunks from host memory (HongTu)."""

    name: ClassVar[str] = "offload"
    samples: ClassVar[bool] = False
    #: one optimizer step per epoch: 20 reach data's accuracy of 3 mini-batch epochs on the
    #: default dataset (README's commands; docs/choosing-a-strategy.md)
    default_epochs: ClassVar[int] = 20
    layer_by_layer: ClassVar[bool] = True
    trains_types: ClassVar[bool] = True  # typed chunks, encoded layer-0 rows
    #: parts=: a part's own rows and in-edges (an edge-cut layout: its partitioner's kind)
    from_parts: ClassVar[bool] = True
    takes_edge_features: ClassVar[bool] = True  # each chunk's edge_attr by its edge ids
    reads: ClassVar[tuple[str, ...]] = ("partition",)  # its transfers stand in for deps
    default_deps: ClassVar[str] = "depcomm"
    default_cache: ClassVar[str] = "none"
    reductions: ClassVar[dict[str, Reduce]] = {
        "replication_alpha": Reduce.mean,  # each rank's replicated share of its rows
        "peak_device_bytes": Reduce.max, "device_bound_bytes": Reduce.max,  # the largest rank's
        "embedding_rows_held": Reduce.max, "embedding_bytes": Reduce.max,  # whole on every rank
        "embedding_rows_touched": Reduce.mean,  # its masters' featureless rows
    }
    #: the rows and gradients its Shuffle shares between the ranks of a batch
    exchange_keys: ClassVar[tuple[str, ...]] = ("bytes_rank_to_rank",)
    _target_: str = "gnnscale.strategies.offload.Offload"
    chunks: int = 8                     # chunks per part; batch b = chunk b of every part
    dedup: str = "inter+intra"          # none | inter | inter+intra
    reorganize: bool = False            # HongTu's Algorithm 4 before training
    level2: str = "range"               # range (id ranges) | metis (METIS inside each part)
    intermediate: str = "auto"          # cache | recompute | auto (HongTu's costs per batch)
    device_budget_gb: float | None = None  # refuse a plan whose device bound exceeds it

    def check(self) -> None:
        """Known choices, at least one chunk, a positive budget (or none)."""
        check_values(self.chunks, self.dedup, self.intermediate, self.device_budget_gb,
                     self.level2)

    @classmethod
    def check_config(cls, cfg: Any, built: Checked) -> None:
        """The model against the options, and an edge-cut to chunk."""
        super().check_config(cfg, built)
        s = cfg.strategy
        check_options(s.chunks, s.dedup, s.intermediate, s.device_budget_gb, built.model,
                      s.get("level2", "range"))
        if cfg.dist.world_size > 1 and partition_kind(cfg) != "edge_cut":
            raise ConfigError("strategy=offload cuts each rank's part into chunks of whole "
                              "in-neighbourhoods: it needs an edge-cut, use partitioner="
                              "metis|random|range|ldg|fennel")

    @classmethod
    def check_data(cls, cfg: Any, built: Checked) -> None:
        """The shared checks, and no more chunks than a part has vertices."""
        super().check_data(cfg, built)
        graph, world, chunks = built.graph, cfg.dist.world_size, cfg.strategy.chunks
        per_part = graph.num_nodes // world
        if chunks > per_part:
            raise ConfigError(f"strategy.chunks={chunks} is more than the ~{per_part} vertices "
                              f"of a part ({graph.num_nodes} vertices, dist.world_size="
                              f"{world}): use strategy.chunks <= {per_part}")

    @classmethod
    def checks_built(cls, cfg: Any) -> bool:
        """With ``strategy.device_budget_gb``: every rank's chunks are planned in the launcher
        (``Offload.check_built``) to name the smallest budget that fits; from ``parts=`` the
        launcher has no graph to plan with and the ranks check it (``Offload._check_budget``)."""
        return cfg.strategy.get("device_budget_gb") is not None and not cfg.get("parts")
