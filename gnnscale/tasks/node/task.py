"""``task=node``: node classification. The model's output rows are class logits; the loss is
the cross-entropy on the labelled training vertices; the metrics are accuracy, the mean
cross-entropy, Macro-F1 and Micro-F1 and, for two classes, ROC-AUC
(:mod:`gnnscale.evaluation.evaluate`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from gnnscale.data.graph import GraphStore
from gnnscale.data.metadata import lacks, lacks_message
from gnnscale.errors import ConfigError
from gnnscale.tasks.base import Predicted, Predicting, Task
from gnnscale.tasks.node.config import NodeTaskConfig


class NodeTask(Task):
    """Node classification; items and seeds are the training vertices themselves."""

    schema = NodeTaskConfig
    loss_name = "cross-entropy of the training vertices' labels"

    def __init__(self) -> None:
        super().__init__()
        self._mask_key: tuple | None = None
        self._mask: torch.Tensor | None = None

    def out_channels(self, graph: GraphStore) -> int:
        """One logit per class."""
        return graph.num_classes

    def check(self, graph: GraphStore, world: int) -> None:
        """Features (a typed graph's featureless types are embedded by the model), labels
        and a training split."""
        missing = lacks(graph.x is not None or graph.is_typed, graph.y is not None,
                        graph.train_idx is not None)
        if missing:
            raise ConfigError(lacks_message(graph.name, missing))

    def train_items(self) -> torch.Tensor:
        """The training vertices."""
        return self.graph.train_idx

    def seeds(self, items: torch.Tensor, epoch: int) -> torch.Tensor:
        """The vertices themselves."""
        return items

    def target(self, items: torch.Tensor, epoch: int) -> torch.Tensor:
        """Their labels."""
        return self.graph.y[items]

    def loss(self, rows: torch.Tensor, target: torch.Tensor, total: int | None = None
             ) -> torch.Tensor:
        """Cross-entropy: the mean, or the sum over ``total``."""
        if total is None:
            return F.cross_entropy(rows, target)
        return F.cross_entropy(rows, target, reduction="sum") / total

    def sharded_loss(self, rows: torch.Tensor, row_ids: torch.Tensor, items: torch.Tensor,
                     epoch: int, group: dist.ProcessGroup | None = None) -> torch.Tensor:
        """The summed cross-entropy of this rank's rows that are items, over the number of
        items (no exchange: a vertex's label needs only its own row)."""
        mask = self._items_mask(row_ids, items)
        y = self.graph.y[row_ids[mask]].to(rows.device)
        picked = rows if bool(mask.all()) else rows[mask.to(rows.device)]
        return F.cross_entropy(picked, y, reduction="sum") / items.numel()

    def _items_mask(self, row_ids: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """Which of ``row_ids`` are items (remembered for the same pair of tensors: a
        full-graph strategy asks every epoch)."""
        key = self._mask_key  # the tensors themselves: held, so never another's reused memory
        if key is None or key[0] is not row_ids or key[1] is not items:
            self._mask_key, self._mask = (row_ids, items), torch.isin(row_ids, items)
        return self._mask

    def evaluate(self, model: torch.nn.Module, graph: GraphStore, device: torch.device,
                 batch_size: int, splits: tuple[str, ...] = ("val", "test"),
                 group: dist.ProcessGroup | None = None) -> dict[str, float]:
        """``<split>_acc``, ``_loss``, ``_macro_f1``, ``_micro_f1`` (and ``_rocauc``) by
        layer-wise inference."""
        from gnnscale.evaluation.evaluate import evaluate

        return evaluate(model, graph, device, batch_size, splits, group=group)

    def evaluate_owned(self, model: torch.nn.Module, forward: Callable[[], torch.Tensor],
                       masters: torch.Tensor, splits: tuple[str, ...],
                       group: dist.ProcessGroup | None) -> dict[str, float]:
        """The same metrics from each rank's rows of its masters."""
        from gnnscale.evaluation.owned import evaluate_owned

        if self.graph is None:
            raise RuntimeError("task=node scores the graph it was prepared with: prepare() it")
        return evaluate_owned(model, forward, masters, self.graph, splits, group)

    def predict(self, on: Predicting, **options: Any) -> Predicted:
        """Per node of ``split`` (default ``all``): the class and every class's probability
        (:func:`gnnscale.tasks.node.predict.predict`)."""
        from gnnscale.tasks.node.predict import predict

        return predict(on, **options)
