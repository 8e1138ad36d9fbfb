"""Typed schemas of the ``task`` group and its config-level checks: torch-free, so the launcher
composes and checks a config without importing torch.

``task=node`` (node classification, the default) and ``task=link`` (link prediction). A task
owns the head (for links, the decoder), the loss and the metrics; strategies own execution.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from gnnscale.errors import ConfigError
from gnnscale.registry import register


class EdgeSplit(str, Enum):
    """Where a link task's train/val/test positive edges come from."""

    auto = "auto"  # the dataset's own split edges when it has them, else random
    given = "given"  # the dataset's split edges (OGB link layout, custom train_pos/...)
    random = "random"  # a seeded random split of the graph's edges (fractions)


class Negatives(str, Enum):
    """How a negative pair is drawn for a positive ``(u, v)``."""

    uniform = "uniform"  # (u', v'): both endpoints uniform over the nodes
    per_source = "per_source"  # (u, v'): the source kept, the target uniform (for MRR)


class Decoder(str, Enum):
    """How a pair of node embeddings becomes a score (a logit)."""

    dot = "dot"  # <z_u, z_v> (graph auto-encoder)
    mlp = "mlp"  # an MLP on z_u * z_v (OGB's LinkPredictor)


class Directed(str, Enum):
    """Whether the graph's edges are undirected pairs (both directions stored)."""

    auto = "auto"  # undirected when every edge's reverse is an edge too
    undirected = "undirected"
    directed = "directed"


@register("task", "node")
@dataclass
class NodeTaskConfig:
    """``task=node``: node classification (cross-entropy on the labelled training vertices;
    accuracy, and ROC-AUC for two classes)."""

    _target_: str = "gnnscale.tasks.node.NodeTask"


@register("task", "link")
@dataclass
class LinkTaskConfig:
    """``task=link``: link prediction (binary cross-entropy on positive edges and sampled
    negatives; ROC-AUC, average precision, Hits@K, MRR)."""

    _target_: str = "gnnscale.tasks.link.LinkTask"
    split: EdgeSplit = EdgeSplit.auto
    val_fraction: float = 0.05  # random split: fraction of the edges for validation
    test_fraction: float = 0.1  # ... and for testing (Kipf & Welling 2016: 85/5/10)
    split_seed: int | None = None  # random split and stored negatives; None: the run's seed
    directed: Directed = Directed.auto
    num_negatives: int = 1  # training negatives per positive edge (drawn every epoch)
    negatives: Negatives = Negatives.uniform  # how training negatives are drawn
    eval_negatives: int = 1  # stored val/test negatives per positive (when not given)
    eval_negative_kind: Negatives = Negatives.uniform
    reject_edges: bool = True  # negatives are never edges of the graph (nor self loops)
    self_pairs: bool = False  # (v, v) of every node is a training positive (GAE: A + I)
    decoder: Decoder = Decoder.dot
    decoder_hidden: int = 256  # decoder=mlp: hidden width
    decoder_layers: int = 2  # decoder=mlp: linear layers
    dim: int = 64  # the embedding width (the model's output width)
    hits_k: list[int] = field(default_factory=lambda: [20, 50, 100])


#: Metrics each task reports (``metric=`` must name one of its own; ``auto`` picks).
NODE_METRICS = ("acc", "rocauc")
LINK_METRICS = ("auc", "ap", "hits", "mrr")


def task_name(cfg: Any) -> str:
    """``node`` or ``link``: which task ``cfg.task`` is (``node`` when the config has none)."""
    task = cfg.get("task") if hasattr(cfg, "get") else None
    target = str(task.get("_target_", "")) if task is not None else ""
    return "link" if target.endswith(".LinkTask") else "node"


def _value(x: Any) -> Any:
    return getattr(x, "value", x)


def check_task_config(cfg: Any) -> None:
    """Refuse, before anything is loaded, a task option or a combination of task, strategy
    and root keys that cannot work (a :class:`ConfigError` naming the key to change)."""
    name = task_name(cfg)
    metric = str(_value(cfg.get("metric", "auto")))
    own = LINK_METRICS if name == "link" else NODE_METRICS
    if metric != "auto" and metric not in own:
        raise ConfigError(f"metric={metric} is not a metric of task={name}: use metric=auto or "
                          f"one of {', '.join(own)}")
    if name != "link":
        return
    t = cfg.task
    if t.num_negatives < 1:
        raise ConfigError(f"task.num_negatives={t.num_negatives}: link training needs at least "
                          "one negative per positive edge (task.num_negatives >= 1)")
    if t.eval_negatives < 1:
        raise ConfigError(f"task.eval_negatives={t.eval_negatives}: scoring needs at least one "
                          "negative per val/test edge (task.eval_negatives >= 1)")
    for key in ("val_fraction", "test_fraction"):
        value = float(t.get(key))
        if not 0.0 < value < 1.0:
            raise ConfigError(f"task.{key}={value} must lie in (0, 1)")
    if float(t.val_fraction) + float(t.test_fraction) >= 1.0:
        raise ConfigError(f"task.val_fraction + task.test_fraction = "
                          f"{float(t.val_fraction) + float(t.test_fraction)} leaves no training "
                          "edge: their sum must be below 1")
    if t.dim < 1:
        raise ConfigError(f"task.dim={t.dim}: the embedding width must be >= 1")
    if not list(t.hits_k) or any(k < 1 for k in t.hits_k):
        raise ConfigError(f"task.hits_k={list(t.hits_k)}: give one or more K >= 1, e.g. "
                          "task.hits_k=[20,50,100]")
    if _value(t.decoder) == "mlp" and (t.decoder_hidden < 1 or t.decoder_layers < 1):
        raise ConfigError("task.decoder=mlp needs task.decoder_hidden >= 1 and "
                          "task.decoder_layers >= 1")
    strategy = str(cfg.strategy.get("_target_", "")) if cfg.get("strategy") is not None else ""
    if strategy.endswith(".Auto"):
        raise ConfigError("strategy=auto ranks candidates by how fast they lower a node-"
                          "classification loss; with task=link pick a strategy "
                          "(strategy=data|split|factored|fullgraph|offload)")
