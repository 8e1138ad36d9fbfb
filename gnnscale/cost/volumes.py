"""The deterministic volumes of one epoch that the cost model projects: edges and vertex
updates per layer with their widths (-> bytes of aggregation, FLOPs of update), bytes per tier,
gradient bytes, sampled edges, ranks. Built from a run folder or given directly."""

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

    def aggregation_bytes(self) -> float:
        """Device-memory bytes of aggregation: forward reads a row per edge, backward reads and
        scatters one (3 row passes of 4-byte floats)."""
        return sum(3 * 4 * e * d_in for e, _, d_in, _ in self.layers)

    def update_flops(self) -> float:
        """FLOPs of the dense updates: 2 per multiply-add, forward + 2x backward."""
        return sum(3 * 2 * v * d_in * d_out * self.linear_maps for _, v, d_in, d_out in self.layers)


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
    widths = layer_widths(run.graph["num_features"], int(model["hidden"]),
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
    )


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
