"""The deterministic volumes of one epoch that the cost model projects: edges and vertex
updates per layer with their widths (-> bytes of aggregation, FLOPs of update), bytes per tier,
gradient bytes, sampled edges, ranks. Built from a run folder or given directly.

A typed run (its results' ``graph`` names node types) is read as a typed model computes: layer
0 reads the typed input's ``hidden``-wide rows, not the raw features; each featured type's
input rows pass its own ``Linear(F_t, hidden)`` (:attr:`Volumes.encode`: the rows the run
gathered of that type, ``bytes_host_to_rank.<type>``, scaled by requested over missed rows
for those a cache served, or every row of it once when it reports none: a whole-graph
strategy encodes each row once a pass); a featureless type's rows are
embedding rows (:attr:`Volumes.embedding_bytes`: the rows looked up, read forward, their
sparse gradient written, and SparseAdam's row, two moments and gradient read and written: 8
row passes, instead of feature rows from the host); R-GCN's update multiplies each
destination's ``R_t * in``-wide per-relation aggregate (``R_t``: the relations into its type)
and its own row (the root weight) by ``out``: ``R_t + 1`` linear maps, averaged over the node
types by node count (:func:`typed_linear_maps`); another typed model is counted as one map per
relation. The aggregation reads one ``in``-wide row per edge whatever its relation."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gnnscale import registry
from gnnscale.compare.runs import Run
from gnnscale.compare.table import GRAD_KEYS, HOST_KEYS, PEER_KEYS, epoch_mean
from gnnscale.sampling.schemas import layer_fanouts
from gnnscale.tasks.config import declared_task

# Linear maps per update of each model (SAGE: lin_l and lin_r; GCN, GAT: one; GIN: a 2-layer
# MLP, counted as two maps of the output width).
LINEAR_MAPS = {"sage": 2, "gcn": 1, "gat": 1, "gin": 2}


@dataclass
class Volumes:
    """Per-epoch volumes summed over ranks. ``layers`` holds, per conv layer (input layer
    first), ``(edges, vertex updates, in width, out width)``."""

    ranks: int
    layers: list[tuple[float, float, int, int]]
    linear_maps: int = 1
    bytes_host_to_rank: float = 0.0
    bytes_rank_to_rank: float = 0.0
    bytes_allreduce: float = 0.0  # every rank's gradient buffer, summed over ranks
    sampled_edges: float = 0.0
    sampler_ranks: int = 0  # ranks that only sample (factored), overlapped with training
    edge_skew: float = 1.0  # slowest rank's edges over the mean
    steps: float = 1.0
    notes: list[str] = field(default_factory=list)
    #: per conv layer, its linear maps (a typed model's relations); None: ``linear_maps``
    layer_maps: list[float] | None = None
    #: a typed input's dense encodings: ``(rows, in width, out width)`` per featured type
    encode: list[tuple[float, int, int]] = field(default_factory=list)
    #: device-memory bytes of the embedding tables' lookups and sparse updates
    embedding_bytes: float = 0.0

    def aggregation_bytes(self) -> float:
        """Device-memory bytes of aggregation: forward reads a row per edge, backward reads and
        scatters one (3 row passes of 4-byte floats); plus the embedding rows' traffic."""
        return sum(3 * 4 * e * d_in for e, _, d_in, _ in self.layers) + self.embedding_bytes

    def update_flops(self) -> float:
        """FLOPs of the dense updates (and a typed input's encodings): 2 per multiply-add,
        forward + 2x backward."""
        maps = self.layer_maps or [float(self.linear_maps)] * len(self.layers)
        return (sum(3 * 2 * v * d_in * d_out * m
                    for (_, v, d_in, d_out), m in zip(self.layers, maps))
                + sum(3 * 2 * rows * d_in * d_out for rows, d_in, d_out in self.encode))


def layer_widths(num_features: int, hidden: int, num_classes: int, num_layers: int
                 ) -> list[tuple[int, int]]:
    """``(in, out)`` width of each conv layer, input layer first."""
    dims = [num_features] + [hidden] * (num_layers - 1) + [num_classes]
    return list(zip(dims[:-1], dims[1:]))


def split_layers(edges: float, updates: float | None, widths: list[tuple[int, int]],
                 fanouts: list[int] | None) -> list[tuple[float, float, int, int]]:
    """Spread an epoch's edges (summed over layers) over the layers. Full-graph: equal shares
    and the given updates. Sampled: layer ``i`` (input first) holds edges in proportion to the
    product of the first ``L - i`` fanouts (hop 1 = the output layer), and updates = its edges
    over its fanout."""
    n = len(widths)
    if fanouts is None:
        per_updates = (updates or 0.0) / n
        return [(edges / n, per_updates, a, b) for a, b in widths]
    weights = [math.prod(fanouts[: n - i]) for i in range(n)]
    total = sum(weights)
    out = []
    for i, (a, b) in enumerate(widths):
        e = edges * weights[i] / total
        out.append((e, e / fanouts[n - 1 - i], a, b))
    return out


def volumes_of_run(run: Run) -> Volumes:
    """The volumes a finished run measured (needs the graph sizes in its results.json)."""
    if not run.graph:
        raise ValueError(f"{run.path}: no graph sizes (results.json 'graph' or train.log): rerun "
                         "it with this version of gnnscale")
    cfg, h = run.config, run.history
    model = cfg["model"]
    typed = bool(run.graph.get("node_types"))
    # a typed model's layer 0 reads the typed input's hidden-wide rows
    width_in = int(model["hidden"]) if typed else run.graph["num_features"]
    widths = layer_widths(width_in, int(model["hidden"]),
                          output_width(cfg, run.graph), int(model["num_layers"]))
    edges = epoch_mean(run, ("edges_computed",))
    reported = any("vertex_updates" in r for r in h)
    full = reported or not samples(run.strategy)
    # a full-graph epoch that reports no updates (offload) updates every vertex once a layer
    updates = epoch_mean(run, ("vertex_updates",)) if reported else \
        float(run.graph["num_nodes"]) * len(widths)
    given = (cfg.get("sampler") or {}).get("fanouts")
    fanouts = None if full else layer_fanouts(given) if given else []
    if not full and len(fanouts or []) != len(widths):
        raise ValueError(f"{run.path}: sampled run without one sampler fanout per layer")
    samplers = int(max(r.get("samplers", 0.0) for r in h))
    extra: dict = {}
    if typed:
        extra = typed_volumes(run, int(model["hidden"]), len(widths),
                              max(run.world_size - samplers, 1))
    return Volumes(
        ranks=run.world_size,
        layers=split_layers(edges, updates if full else None, widths, fanouts),
        linear_maps=LINEAR_MAPS.get(_model_name(model), 1),
        bytes_host_to_rank=epoch_mean(run, HOST_KEYS),
        bytes_rank_to_rank=epoch_mean(run, PEER_KEYS),
        bytes_allreduce=epoch_mean(run, GRAD_KEYS),
        sampled_edges=0.0 if full else edges,
        sampler_ranks=samplers,
        edge_skew=max(1.0, epoch_mean(run, ("edge_skew",))) if any("edge_skew" in r for r in h)
        else 1.0,
        steps=epoch_mean(run, ("steps",)) or 1.0,
        **extra,
    )


def typed_linear_maps(graph: dict, model: dict) -> float:
    """A typed model's linear maps per destination row (see the module docstring): R-GCN's
    ``R_t`` relation maps plus its root weight, another typed model's ``R_t``; averaged over
    the node types by node count. ``graph``: a run's graph sizes with ``node_types`` (counts)
    and ``edge_type_list`` (``[src, rel, dst]``); without the list every type counts all the
    graph's relations."""
    counts = graph["node_types"]
    listed = graph.get("edge_type_list")
    rels = {t: sum(1 for e in listed if e[2] == t) if listed else int(graph.get("edge_types", 1))
            for t in counts}
    root = 1 if _model_name(model) == "rgcn" and model.get("root_weight", True) else 0
    total = sum(counts.values()) or 1
    return sum(n * (rels[t] + root) for t, n in counts.items()) / total


def typed_volumes(run: Run, hidden: int, layers: int, trainers: int) -> dict:
    """The typed parts of a run's :class:`Volumes`: per-layer linear maps, the featured types'
    encodings, the embedding rows' device traffic."""
    graph = run.graph or {}  # a typed run's sizes (volumes_of_run checked them)
    dims: dict[str, int] = graph.get("feature_dims", {})
    misses = epoch_mean(run, ("misses",))
    # rows read from a cache are encoded too: scale the host rows by requested / missed
    cached = epoch_mean(run, ("requested",)) / misses if misses else 1.0
    encode = []
    for t, d in dims.items():
        if not d:
            continue
        key = f"bytes_host_to_rank.{t}"
        rows = (epoch_mean(run, (key,)) / (4 * d) * cached
                if any(key in r for r in run.history) else float(graph["node_types"][t]))
        encode.append((rows, int(d), hidden))
    touched = epoch_mean(run, ("embedding_rows_touched",)) * trainers
    return {"layer_maps": [typed_linear_maps(graph, run.config["model"])] * layers,
            "encode": encode, "embedding_bytes": 8 * 4 * hidden * touched}


def samples(strategy: str) -> bool:
    """Whether the strategy option ``strategy`` trains sampled mini-batches (its schema's
    ``samples``; True for one without a schema)."""
    cls = registry.schemas("strategy").get(strategy)
    return bool(getattr(cls, "samples", True))


def output_width(cfg: dict, graph: dict) -> int:
    """The model's output width, as the run's task declares it (``TaskConfig.output_width``:
    the number of classes, or link prediction's embedding width ``task.dim``)."""
    return declared_task(cfg).output_width(cfg.get("task") or {}, int(graph["num_classes"]))


def _model_name(model_cfg: dict) -> str:
    parts = str(model_cfg.get("_target_", "")).split(".")
    return parts[-2] if len(parts) >= 2 else ""
