"""Task base: what is learned. A task owns the head, the loss and the metrics; a strategy owns
execution and calls the task at a few seams, whatever the task is. What a task is (what it
needs of a dataset, its metrics and how they reduce, its launcher checks) it declares
torch-free in its schema, ``tasks/<name>/config.py`` (a
:class:`~gnnscale.tasks.config.TaskConfig` named by :attr:`Task.schema`).

The seams (every strategy uses some of them):

- :meth:`Task.prepare` (once per process, before the model is built): the graph the strategies
  train on (link prediction: the message graph, val/test edges removed) and the task's own
  data (labels, or the edge split);
- :meth:`Task.train_items`: what the shared schedule permutes and cuts into mini-batches
  (training vertices, or training-edge ids); :meth:`Task.seeds` the vertices a mini-batch of
  items needs output rows for, :meth:`Task.target` what the loss compares them with;
- :meth:`Task.loss`: a micro-batch's loss from its output rows (``data``, ``factored``);
  :meth:`Task.initial_loss` the same loss of the initial parameters on the training items
  (``strategy=auto``'s baseline for every candidate's loss decrease);
- :meth:`Task.sharded_loss`: a collective loss from output rows spread over the ranks of a
  group (``split``: each rank its owned targets; ``fullgraph``/``offload``: each its masters),
  normalised by the global number of terms so that gradients summed over the ranks equal one
  process's;
- :meth:`Task.evaluate` (layer-wise full-neighbour inference) and :meth:`Task.evaluate_owned`
  (a strategy's own partitioned forward): the metrics, identical on every rank;
- :meth:`Task.predict` (a finished run, on the CPU): the tables of its predictions, keyed by
  the user's ids through the :class:`Predicting` the runner gives it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
import torch.distributed as dist

from gnnscale.data.graph import GraphStore
from gnnscale.errors import UserError
from gnnscale.tasks.config import TaskConfig

if TYPE_CHECKING:
    from gnnscale.models.base import GNN

#: The attribute under which a task's head (its trainable parameters) joins the model, so that
#: optimizers, gradient reductions and checkpoints include it without knowing the task.
HEAD = "task_head"

#: A table of a prediction: its columns, each an array with a row per entry.
Columns = dict[str, np.ndarray]
#: A task's predictions: its tables by name, and the names of the entries of a table's column
#: that holds a row of values per entry (``{"nodes": {"prob": [class names]}}``).
Predicted = tuple[dict[str, Columns], dict[str, dict[str, list[str]]]]


@dataclass
class Predicting:
    """What the runner gives :meth:`Task.predict` (``python -m gnnscale.predict``,
    ``Run.predict``): the finished run's model (on the CPU, eval mode) and graph (as the task
    prepared it), the dataset's class names (None when it stores none), the request's batch
    size and progress flag, and the runner's keying of ids, so that a task reads and writes the
    user's ids without knowing how they are stored:

    - ``keys(nodes, name)``: the columns keying global node ids ``nodes`` (a tensor): ``name``
      (the user's ids, or the internal ids without a map), and ``<name>_type`` when they span
      several node types;
    - ``nodes_of(value, what, node_type)``: global ids of the user's ids ``value`` (an array,
      or a file of ids: ``.npy``, or the first column of ``.csv``/``.parquet``) of
      ``node_type`` (None: the graph's one type, or the first that has a map); ``what`` names
      the option in a refusal;
    - ``pairs_of(value)``: the user's ``(src, dst)`` ids of a pairs file (or a tuple of two
      arrays), unconverted;
    - ``bar(total, desc)``: a progress bar (None when progress is off)."""

    model: GNN
    graph: GraphStore
    classes: list[str] | None
    batch_size: int
    progress: bool
    keys: Callable[[torch.Tensor, str], Columns]
    nodes_of: Callable[[Any, str, str | None], torch.Tensor]
    pairs_of: Callable[[Any], tuple[np.ndarray, np.ndarray]]
    bar: Callable[[int, str], Any]


class Task(ABC):
    """What is learned: the head, the loss and the metrics (see the module docstring)."""

    #: Its declarations and launcher checks: a torch-free class in the task's ``config.py``.
    schema: ClassVar[type[TaskConfig]] = TaskConfig

    #: The option name (``task=<name>``), taken from its schema.
    name: ClassVar[str] = ""

    #: What its training loss is, in words (``strategy=auto`` says what it ranked by).
    loss_name: ClassVar[str] = "the training loss"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.schema.name

    def __init__(self) -> None:
        self.graph: GraphStore | None = None
        self.head: torch.nn.Module | None = None

    # -- set-up ---------------------------------------------------------------------------------
    def prepare(self, graph: GraphStore, root: str | None = None, seed: int = 0) -> GraphStore:
        """The graph strategies train on, derived from the dataset's ``graph`` once (and
        stored under ``root`` when the task derives data); ``seed`` is the run's seed."""
        self.graph = graph
        return graph

    @abstractmethod
    def out_channels(self, graph: GraphStore) -> int:
        """The model's output width for this task."""

    def attach(self, model: torch.nn.Module) -> None:
        """Build the head (under the caller's seed) and make it a submodule of ``model``."""
        self.head = self.make_head()
        if self.head is not None:
            model.add_module(HEAD, self.head)

    def make_head(self) -> torch.nn.Module | None:
        """The task's trainable head (None: it has none)."""
        return None

    @abstractmethod
    def check(self, graph: GraphStore, world: int) -> None:
        """Raise :class:`~gnnscale.errors.ConfigError` when ``graph`` cannot be trained on
        with ``world`` ranks (in the launcher, on the prepared graph)."""

    # -- mini-batches ---------------------------------------------------------------------------
    @abstractmethod
    def train_items(self) -> torch.Tensor:
        """The training items the schedule permutes (1-D int64)."""

    @abstractmethod
    def seeds(self, items: torch.Tensor, epoch: int) -> torch.Tensor:
        """The vertices whose output rows the loss of ``items`` reads, in row order."""

    @abstractmethod
    def target(self, items: torch.Tensor, epoch: int) -> Any:
        """What :meth:`loss` compares the rows of :meth:`seeds` with (has ``.to(device)``)."""

    @abstractmethod
    def loss(self, rows: torch.Tensor, target: Any, total: int | None = None) -> torch.Tensor:
        """The loss of one micro-batch from the output rows of its seeds: the mean over its
        terms, or their sum over ``total`` when given."""

    @abstractmethod
    def sharded_loss(self, rows: torch.Tensor, row_ids: torch.Tensor, items: torch.Tensor,
                     epoch: int, group: dist.ProcessGroup | None = None) -> torch.Tensor:
        """This rank's part of the loss of ``items`` (the same on every rank of ``group``),
        whose output rows are spread over the ranks: ``rows`` are this rank's, of vertices
        ``row_ids`` (each vertex on exactly one rank). The sum of the parts over the ranks is
        the mean over every term of ``items``. Collective when the task exchanges rows."""

    def num_terms(self, items: torch.Tensor) -> int:
        """The terms of the loss of ``items`` (what the mean divides by)."""
        return int(items.numel())

    def initial_loss(self, model: torch.nn.Module, graph: GraphStore,
                     items: torch.Tensor | None = None, epoch: int = 0,
                     batch_size: int = 4096, group: dist.ProcessGroup | None = None) -> float:
        """The training loss of ``items`` (default: every training item) under ``model``'s
        present parameters, as a training epoch ``epoch`` measures it: through
        :meth:`seeds`, :meth:`target` and :meth:`loss` (link prediction: the negatives that
        epoch draws), the seeds' rows by layer-wise full-neighbour inference on ``graph`` in
        training mode (keyed dropout applies when the model has a key). ``strategy=auto``
        compares every candidate's loss decrease with it. Collective under a process group:
        each rank of ``group`` computes its share of the rows, and every rank the loss."""
        from gnnscale.distributed.collectives import gather_rows, group_size
        from gnnscale.evaluation.evaluate import layerwise_logits

        items = self.train_items() if items is None else items
        with torch.no_grad():
            rows = layerwise_logits(model, graph, self.seeds(items, epoch),
                                    torch.device("cpu"), batch_size, group=group,
                                    train_mode=True)
            if group_size(group) > 1:
                rows = gather_rows(rows, group).cpu()
            return float(self.loss(rows, self.target(items, epoch)))

    # -- evaluation -----------------------------------------------------------------------------
    @abstractmethod
    def evaluate(self, model: torch.nn.Module, graph: GraphStore, device: torch.device,
                 batch_size: int, splits: tuple[str, ...] = ("val", "test"),
                 group: dist.ProcessGroup | None = None) -> dict[str, float]:
        """The metrics of ``splits`` by layer-wise full-neighbour inference (collective)."""

    @abstractmethod
    def evaluate_owned(self, model: torch.nn.Module, forward: Callable[[], torch.Tensor],
                       masters: torch.Tensor, splits: tuple[str, ...],
                       group: dist.ProcessGroup | None) -> dict[str, float]:
        """The metrics of ``splits`` from a partitioned forward: ``forward()`` returns this
        rank's output rows of ``masters`` (each vertex one rank's master); collective."""

    # -- predictions ----------------------------------------------------------------------------
    def predict(self, on: Predicting, **options: Any) -> Predicted:
        """The tables of a finished run's predictions (see :class:`Predicting`), from the
        request's ``options`` (every keyword of the request: a task reads its own and refuses,
        in one :class:`~gnnscale.errors.UserError` line, one it does not take that was given);
        default: the task writes none."""
        raise UserError(f"task={self.name} writes no predictions (its class defines no "
                        "predict)")


def eval_mode(model: torch.nn.Module, forward: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``forward()`` under no_grad with ``model`` in eval mode (its mode restored after)."""
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            return forward()
    finally:
        model.train(was)
