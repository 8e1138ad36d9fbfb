"""``strategy=split``'s typed schema, declarations and launcher checks (torch-free;
``SplitParallel`` takes its declarations from here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.schema import Reduce, require_one_of
from gnnscale.strategies.config import Checked, SamplingConfig

SAMPLE_ON = ("all", "leader")
INPUTS = ("auto", "read", "shuffle")


@register("strategy", "split")
@dataclass
class SplitParallelConfig(SamplingConfig):
    """``strategy=split``'s options: one shared sample per step, split by owner (GSplit)."""

    name: ClassVar[str] = "split"
    layer_by_layer: ClassVar[bool] = True  # each rank computes its owned rows of each layer
    #: The split plans (pre-aggregation, GCN's source scaling) assume unweighted edges.
    takes_weighted_blocks: ClassVar[bool] = False
    #: Typed graphs: each rank encodes the typed rows it loads, shuffles dense rows; the local
    #: blocks carry their edges' types (relations) and ids; sparse tables' gradients summed.
    trains_types: ClassVar[bool] = True
    #: parts=: the whole topology and labels, its own feature rows, the others' from owners
    from_parts: ClassVar[bool] = True
    #: Each local block's edge features are gathered by its edge ids on the rank computing it.
    takes_edge_features: ClassVar[bool] = True
    deps: ClassVar[str] = "communicate"
    # the cost model: it recomputes a remote row (or a layer's whole rest, sparing its two
    # exchanges) where that is cheaper than shuffling it; GSplit's setting is depcomm
    default_deps: ClassVar[str] = "hybrid"
    default_cache: ClassVar[str] = "presample"
    reductions: ClassVar[dict[str, Reduce]] = {
        "local_edge_ratio": Reduce.mean,  # each rank's share of its edges that stay local
        "edge_skew": Reduce.max,  # the busiest rank's edges over the mean
        "embedding_rows_held": Reduce.max, "embedding_bytes": Reduce.max,  # whole on every rank
        "embedding_rows_touched": Reduce.mean,  # the featureless rows each rank loaded
    }
    exchange_keys: ClassVar[tuple[str, ...]] = ("bytes_shuffled",)  # hidden rows by owner
    columns: ClassVar[tuple[str, ...]] = ("local_edge_ratio", "edge_skew", "bytes_shuffled")
    _target_: str = "gnnscale.strategies.split.SplitParallel"
    batch_size: int = 1024  # global mini-batch, split over the ranks by owner
    prefetch: int = 2  # mini-batches sampled and split ahead; 0 = inline
    preaggregate: bool = False  # senders average edges into remote destinations (SAGE)
    sample_workers: int = 0  # sampler processes per sampling rank; 0 = the prefetch thread
    # all: step s is sampled and split by rank s mod world, which sends each rank its part
    # (GSplit's parallel split-samplers); leader: rank 0 samples every step and broadcasts it
    sample_on: str = "all"
    # where a rank's layer-0 rows come from: shuffle (GSplit: each input row is loaded once,
    # by its owner, and shuffled to the ranks whose blocks read it); read (every rank reads its
    # local block's input rows from the host table itself: no layer-0 shuffle); auto: read
    # where ranks are CPU processes sharing the host's table, shuffle on accelerators
    inputs: str = "auto"

    def check(self) -> None:
        """The sampling options, who samples and where input rows come from."""
        super().check()
        require_one_of("strategy.sample_on", self.sample_on, SAMPLE_ON)
        require_one_of("strategy.inputs", self.inputs, INPUTS)
        if self.inputs == "read" and self.preaggregate:
            raise ConfigError("strategy.inputs=read reads every input row a rank's block "
                              "needs, and strategy.preaggregate=true has peers ship averaged "
                              "input rows instead: set strategy.inputs=shuffle (or auto) or "
                              "strategy.preaggregate=false")

    @classmethod
    def check_config(cls, cfg: Any, built: Checked) -> None:
        """Pre-aggregation only where the model's aggregation makes it exact."""
        super().check_config(cfg, built)
        model = built.model
        if cfg.strategy.get("preaggregate") and not model.preaggregatable:
            raise ConfigError("strategy.preaggregate=true is exact only for a mean/sum "
                              "aggregation of the raw source rows (model=sage with aggr=mean|sum "
                              f"and model.residual=false); {model.title} "
                              f"(aggr={getattr(model, 'aggr', None)!r}) is not: set "
                              "strategy.preaggregate=false")
        if cfg.strategy.get("inputs") == "read" and cfg.get("parts"):
            raise ConfigError("strategy.inputs=read reads input rows from the whole feature "
                              "table, and a host of a partitioned layout (parts=) holds its "
                              "part's rows only: set strategy.inputs=shuffle (or auto)")

    @classmethod
    def check_data(cls, cfg: Any, built: Checked) -> None:
        """The shared checks; a typed graph's store caches replicated rows only."""
        super().check_data(cfg, built)
        graph = built.graph
        if graph is not None and graph.is_typed and cfg.get("cache") is not None \
                and cfg.cache.get("placement") == "partitioned":
            raise ConfigError(f"dataset {graph.name} is a typed graph, whose feature store "
                              "caches replicated rows only: set cache.placement=replicated")
