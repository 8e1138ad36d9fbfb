"""``task=link``'s typed schema, declarations and launcher checks (torch-free: the launcher
composes and checks with it; ``LinkTask`` names it as its ``schema``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar

from gnnscale.data.metadata import DatasetMeta
from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.schema import Reduce
from gnnscale.tasks.config import TaskConfig
from gnnscale.tasks.link import edge_types


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


@register("task", "link")
@dataclass
class LinkTaskConfig(TaskConfig):
    """``task=link``: link prediction (binary cross-entropy on positive edges and sampled
    negatives; ROC-AUC, average precision, Hits@K, MRR)."""

    name: ClassVar[str] = "link"
    title: ClassVar[str] = "link prediction"
    needs: ClassVar[tuple[str, ...]] = ("features",)  # nodes are encoded from their features
    derives_data: ClassVar[bool] = True  # the edge split and the message graph
    parts_reason: ClassVar[str] = ("its edge split and message graph are derived from the "
                                    "whole dataset, and a part layout holds the graph before "
                                    "the split")
    metrics: ClassVar[tuple[str, ...]] = ("auc", "ap", "hits", "mrr")  # hits: val_hits@K
    auto_metric: ClassVar[tuple[str, ...]] = ("auc",)
    #: the endpoint rows a rank sent to score pairs (sharded loss, evaluation): a total
    reductions: ClassVar[dict[str, Reduce]] = {"bytes_pair_exchange": Reduce.sum}
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
    #: a typed graph's edge type to predict: its relation (``writes``) or ``src__rel__dst``;
    #: null: the graph's one edge type that is not an added reverse (tasks/link/edge_types.py)
    edge_type: str | None = None

    @classmethod
    def check_data(cls, cfg: Any, meta: DatasetMeta, ranks: int = 1) -> None:
        """Features (on a typed graph: none needed, the typed model embeds featureless types)
        and, on a typed graph, an edge type ``task.edge_type`` names (or the one candidate)."""
        if not meta.is_typed:
            super().check_data(cfg, meta, ranks)
            return
        task = cfg.get("task") if hasattr(cfg, "get") else None
        option = None if task is None else task.get("edge_type")
        edge_types.resolve(option, meta.edge_types, meta.name)

    @classmethod
    def output_width(cls, node: Any, num_classes: int) -> int:
        """The embedding width ``task.dim``."""
        return int(node.get("dim", cls.dim))

    def check(self) -> None:
        """Negatives, split fractions, the embedding width, Hits@K and the MLP decoder's
        sizes."""
        if self.num_negatives < 1:
            raise ConfigError(f"task.num_negatives={self.num_negatives}: link training needs "
                              "at least one negative per positive edge (task.num_negatives >= 1)")
        if self.eval_negatives < 1:
            raise ConfigError(f"task.eval_negatives={self.eval_negatives}: scoring needs at "
                              "least one negative per val/test edge (task.eval_negatives >= 1)")
        for key in ("val_fraction", "test_fraction"):
            value = float(getattr(self, key))
            if not 0.0 < value < 1.0:
                raise ConfigError(f"task.{key}={value} must lie in (0, 1)")
        held = float(self.val_fraction) + float(self.test_fraction)
        if held >= 1.0:
            raise ConfigError(f"task.val_fraction + task.test_fraction = {held} leaves no "
                              "training edge: their sum must be below 1")
        if self.dim < 1:
            raise ConfigError(f"task.dim={self.dim}: the embedding width must be >= 1")
        if not list(self.hits_k) or any(k < 1 for k in self.hits_k):
            raise ConfigError(f"task.hits_k={list(self.hits_k)}: give one or more K >= 1, e.g. "
                              "task.hits_k=[20,50,100]")
        mlp = getattr(self.decoder, "value", self.decoder) == "mlp"
        if mlp and (self.decoder_hidden < 1 or self.decoder_layers < 1):
            raise ConfigError("task.decoder=mlp needs task.decoder_hidden >= 1 and "
                              "task.decoder_layers >= 1")
