"""Layer-wise full-neighborhood inference over all nodes (as PyG and DGL examples do).

Layer ``l`` is computed for every vertex from layer ``l-1`` of all its in-neighbors, so the
accuracy does not depend on sampling. The ranks of a group split the vertices of each layer
and all-gather the hidden features; the last layer is computed only for the evaluated vertices.
A layer whose linear map shrinks the rows (:meth:`GNN.reorders`, e.g. GCN on wide features)
is evaluated reordered: each rank transforms only its share of the rows, the narrow results
are all-gathered, and the aggregation reads those, instead of every rank gathering and
transforming the wide rows of its whole in-neighbourhood (most of the graph).
A user's whole-graph-only model (``model=custom`` without a ``convs`` list) runs once on the
whole graph instead (every rank the same forward, each keeping its share of the rows).
On a typed graph layer 0 reads the typed model's encoded rows (:meth:`RGCN.encode` of every
vertex's typed inputs: each rank encodes its share, the ranks all-gather them), and every
block carries its edges' types (the sampler reads them from the graph).
From a partitioned layout (``parts=``: each rank holds its own feature rows) the rows layer 0
reads are fetched from their owners once, before it (:func:`gnnscale.cache.store.owner_rows`).
A model that reads edge features gets each block's ``edge_attr`` (the rows of its edges' ids,
:mod:`gnnscale.cache.edges`), as in training.
A run whose strategy serves its features through the cache tiers at ``cache.feature_dtype``
(float16, bfloat16) trains on them rounded to 16 bits; its evaluation reads them rounded the
same way (:func:`features_as`, :func:`served_dtype`), so a run's metrics (and its predictions
and embeddings) come from the features it trained on: layer 0's rows are rounded as they are
read, exactly as the tiers' rounded copy holds them, nothing copied.
This is :meth:`Strategy.evaluate`'s default; a strategy may evaluate its own way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from gnnscale.cache.edges import EdgeFeatures
from gnnscale.cache.store import typed_inputs
from gnnscale.data.graph import GraphStore
from gnnscale.distributed.collectives import (
    all_reduce_host,
    gather_rows,
    group_rank,
    group_size,
)
from gnnscale.distributed.device import to_device
from gnnscale.models.base import GNN
from gnnscale.sampling.neighbor import NeighborSampler

#: The dtype layer-wise inference rounds the features to as it reads them (None: as stored).
_SERVED: ContextVar[torch.dtype | None] = ContextVar("gnnscale_served_dtype", default=None)


def _as_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    """``dtype`` (a name such as ``"float16"``) as a torch dtype; None for float32 or None."""
    want = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    return None if want is None or want == torch.float32 else want


@contextmanager
def features_as(dtype: str | torch.dtype | None) -> Iterator[None]:
    """Within it, layer-wise inference (:func:`layerwise_logits`, :func:`evaluate`) reads the
    features rounded to ``dtype`` (``cache.feature_dtype``: as the run's tiers serve them),
    each read up-cast back to the table's dtype; None or float32: as stored."""
    token = _SERVED.set(_as_dtype(dtype))
    try:
        yield
    finally:
        _SERVED.reset(token)


def served_dtype(cfg: Any) -> str | None:
    """The dtype a run of ``cfg`` trains its features in when it is not the stored one:
    ``cache.feature_dtype`` if its strategy reads the cache config (it serves the features
    through the tiers; ``fullgraph`` and ``offload`` do not), else None."""
    from gnnscale import registry

    cache = cfg.get("cache")
    dtype = cache.get("feature_dtype") if cache is not None else None
    if dtype in (None, "float32") or cfg.get("strategy") is None:
        return None
    opts = registry.options("strategy", cfg.strategy)
    return str(dtype) if opts is None or "cache" in getattr(opts, "reads", ("cache",)) \
        else None


def rounding(dtype: str | torch.dtype | None = None) -> Callable[[Any], Any]:
    """Rows as the run serves them: float rows rounded to ``dtype`` (default: the one
    :func:`features_as` set) and back to their own dtype; the rows themselves when none."""
    want = _as_dtype(dtype) if dtype is not None else _SERVED.get()
    if want is None:
        return _same

    def rounded(rows: Any) -> Any:
        if isinstance(rows, torch.Tensor) and rows.is_floating_point() and rows.dtype != want:
            return rows.to(want).to(rows.dtype)
        return rows
    return rounded


def _same(rows: Any) -> Any:
    return rows


@torch.no_grad()
def layerwise_logits(model: GNN, graph: GraphStore, nodes: torch.Tensor, device: torch.device,
                     batch_size: int = 4096, group: dist.ProcessGroup | None = None,
                     reorder: bool = True, train_mode: bool = False) -> torch.Tensor:
    """Logits of this rank's share of ``nodes`` (``torch.tensor_split(nodes, world)[rank]``,
    ranks and world of ``group``); ``reorder=False`` runs every layer as a conv;
    ``train_mode=True`` keeps the model's training mode (its dropout) instead of eval.
    Layer 0 reads the features as the run serves them (:func:`features_as`)."""
    was_training = model.training
    model.train(train_mode)
    served = rounding()
    if not getattr(model, "layer_wise", True):  # a user's whole-graph-only model: one forward
        mine = torch.tensor_split(nodes, group_size(group))[group_rank(group)]
        ids = torch.arange(graph.num_nodes, device=device)
        out = model.whole_graph(to_device(served(graph.feature_matrix()), device),
                                to_device(graph.edge_index(), device), ids)[mine.to(device)]
        model.train(was_training)
        return out
    edges = EdgeFeatures(graph, device) if getattr(model, "reads_edge_features", False) \
        else None
    one_hop = NeighborSampler(fanouts=[-1], with_edge_ids=edges is not None)
    world, rank = group_size(group), group_rank(group)
    h = _encoded(model, graph, device, batch_size, group, served) if graph.is_typed else \
        graph.feature_matrix()
    if getattr(h, "held", None) is not None:  # a part's rows (parts=): layer 0's from owners
        h = _layer0_rows(model, graph, h, nodes, one_hop, reorder, group)
    for layer in range(model.num_layers):
        last = layer == model.num_layers - 1
        read = served if layer == 0 and not graph.is_typed else _same  # the stored features
        targets = nodes if last else torch.arange(graph.num_nodes)
        mine = torch.tensor_split(targets, world)[rank]
        z = _transformed(model, layer, h, device, batch_size, group, read) if (
            reorder and model.reorders(layer)) else None
        rows = _Rows(len(mine))  # this rank's share of the layer, filled chunk by chunk
        for chunk in torch.split(mine, batch_size):
            mb = one_hop.sample(graph, chunk, 0)
            if edges is not None:
                edges.attach(mb.blocks)
            block = mb.blocks[0].to(device)
            if z is None:
                rows.add(model.layer(layer, to_device(read(h[mb.n_id]), device), block))
                continue
            ids = chunk.to(device)
            x_dst = to_device(read(_rows(h, chunk, contiguous=not last)), device)
            if layer == 0:
                x_dst = model.inputs(x_dst, ids)
            agg = model.aggregate(layer, to_device(z[mb.n_id], device), block)
            out = model.update(layer, agg, x_dst, ids, to_device(z[chunk], device))
            rows.add(model.post(layer, out, ids))
        out = rows.done(h)
        # the layer's input and transformed rows go before the next layer's are gathered: a
        # rank holds about one copy of the graph's hidden rows at a time, not three
        del h, z
        h = out if last else gather_rows(out, group).cpu()
    model.train(was_training)
    return h


class _Rows:
    """A share's output rows, written into one tensor as the chunks come (not a list of
    chunks concatenated at the end, which holds the share twice)."""

    def __init__(self, n: int) -> None:
        self.n, self.at = n, 0
        self.out: torch.Tensor | None = None

    def add(self, chunk: torch.Tensor) -> None:
        """The next chunk's rows."""
        if self.out is None:
            self.out = chunk.new_empty((self.n, *chunk.shape[1:]))
        self.out[self.at:self.at + chunk.shape[0]] = chunk
        self.at += chunk.shape[0]

    def done(self, like: torch.Tensor) -> torch.Tensor:
        """The share (``like``'s dtype, 0 x 0, when it has no rows)."""
        return self.out if self.out is not None else like.new_zeros((0, 0))


def _layer0_rows(model: GNN, graph: GraphStore, view, nodes: torch.Tensor,
                 one_hop: NeighborSampler, reorder: bool, group: dist.ProcessGroup | None):
    """The layer-0 rows this rank reads of a part's feature view (``parts=``): its share of
    the vertices, and their in-neighbours' unless the layer is evaluated reordered, fetched
    from their owners once (collective), as a view of those rows."""
    from gnnscale.cache.store import owner_rows
    from gnnscale.partition.parts import RowView

    world, rank = group_size(group), group_rank(group)
    targets = nodes if model.num_layers == 1 else torch.arange(graph.num_nodes)
    mine = torch.tensor_split(targets, world)[rank]
    if reorder and model.reorders(0):  # _transformed's share, and the rows it updates
        share = torch.tensor_split(torch.arange(graph.num_nodes), world)[rank]
        need = torch.cat([share, mine])
    else:
        need = one_hop.sample(graph, mine, 0).n_id
    need = torch.unique(need)
    return RowView(owner_rows(view, need, group), need, graph.num_nodes, view.what,
                   view.where)


def _encoded(model: GNN, graph: GraphStore, device: torch.device, batch_size: int,
             group: dist.ProcessGroup | None, served: Callable[[Any], Any] = _same
             ) -> torch.Tensor:
    """A typed model's layer-0 rows of every vertex (CPU): each rank encodes its share of the
    vertices' typed inputs (their features read through ``served``), then the ranks
    all-gather the results."""
    encode = getattr(model, "encode", None)
    if encode is None:
        raise ValueError(f"{type(model).__name__} does not read typed inputs: a typed graph "
                         "needs a typed model (model=rgcn)")
    share = torch.tensor_split(torch.arange(graph.num_nodes), group_size(group))[
        group_rank(group)]
    outs = [encode(_served_inputs(typed_inputs(graph, chunk), served).to(device)).cpu()
            for chunk in torch.split(share, batch_size)]
    out = torch.cat(outs) if outs else torch.zeros(0, model.widths(0)[0])
    return gather_rows(out, group).cpu()


def _served_inputs(inputs: Any, served: Callable[[Any], Any]) -> Any:
    """Typed inputs with each type's features read through ``served``."""
    if served is _same:
        return inputs
    return dataclasses.replace(inputs, features={t: served(x)
                                                 for t, x in inputs.features.items()})


def _transformed(model: GNN, layer: int, h: torch.Tensor, device: torch.device,
                 batch_size: int, group: dist.ProcessGroup | None,
                 read: Callable[[Any], Any] = _same) -> torch.Tensor:
    """``transform(layer, rows)`` of every vertex (CPU): each rank transforms its share of
    ``h`` read through ``read`` (layer 0: through :meth:`GNN.inputs`), then the ranks
    all-gather the results."""
    share = torch.tensor_split(torch.arange(h.shape[0]), group_size(group))[group_rank(group)]
    outs = []
    for chunk in torch.split(share, batch_size):
        x = to_device(read(_rows(h, chunk, contiguous=True)), device)
        if layer == 0:
            x = model.inputs(x, chunk.to(device))
        outs.append(model.transform(layer, x))
    out = torch.cat(outs) if outs else h.new_zeros((0, _out_width(model, layer)))  # no rows
    return gather_rows(out, group).cpu()


def _out_width(model: GNN, layer: int) -> int:
    """Output columns of ``layer``'s movable linear map (its ``weight`` is ``out x in``)."""
    weight = model.pre_linear(layer).weight
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"{type(model).__name__}.pre_linear({layer}) has no weight matrix")
    return int(weight.shape[0])


def _rows(h: torch.Tensor, ids: torch.Tensor, contiguous: bool) -> torch.Tensor:
    """``h[ids]``; a view, not a copy, when ``ids`` is an ascending run of ids."""
    if contiguous and ids.numel():
        return h[int(ids[0]): int(ids[0]) + ids.numel()]
    return h[ids]


def evaluate(model: GNN, graph: GraphStore, device: torch.device, batch_size: int = 4096,
             splits: tuple[str, ...] = ("val", "test"), group: dist.ProcessGroup | None = None
             ) -> dict[str, float]:
    """``<split>_acc`` for each split, identical on every rank of ``group`` (collective)."""
    idx = [getattr(graph, f"{s}_idx") for s in splits]
    present = [(s, i) for s, i in zip(splits, idx) if i is not None and i.numel()]
    if not present:
        return {}
    nodes = torch.cat([i for _, i in present])
    logits = layerwise_logits(model, graph, nodes, device, batch_size, group)
    mine = torch.tensor_split(torch.arange(nodes.numel()), group_size(group))[group_rank(group)]
    return split_metrics(logits, graph.labels()[nodes[mine]], mine, [i.numel() for _, i in present],
                         [s for s, _ in present], group)


def split_metrics(logits: torch.Tensor, labels: torch.Tensor, positions: torch.Tensor,
                  split_sizes: list[int], names: list[str],
                  group: dist.ProcessGroup | None = None) -> dict[str, float]:
    """``<name>_acc``, ``<name>_loss`` (mean cross-entropy), ``<name>_macro_f1`` and
    ``<name>_micro_f1`` per split, plus ``<name>_rocauc`` for a binary task, from this rank's
    ``logits`` of the rows at ``positions`` of the concatenated splits (collective)."""
    pred = logits.argmax(-1).cpu()
    right = (pred == labels.cpu()).double()
    loss = F.cross_entropy(logits.float(), labels.to(logits.device), reduction="none")
    sums = split_sums(torch.stack([right, loss.double().cpu()], 1), positions, split_sizes,
                      group)
    out = {}
    for k, (s, n) in enumerate(zip(names, split_sizes)):
        out[f"{s}_acc"] = float(sums[k, 0]) / n
        out[f"{s}_loss"] = float(sums[k, 1]) / n
    out.update(f1_per_split(pred, labels.cpu(), positions, split_sizes, names,
                            logits.shape[1], group))
    if logits.shape[1] == 2:
        out.update(rocauc_per_split(logits, labels, positions, split_sizes, names, group))
    return out


def f1_per_split(pred: torch.Tensor, labels: torch.Tensor, positions: torch.Tensor,
                 split_sizes: list[int], names: list[str], classes: int,
                 group: dist.ProcessGroup | None = None) -> dict[str, float]:
    """``<name>_macro_f1`` and ``<name>_micro_f1`` per split from this rank's predicted and
    true classes of the rows at ``positions`` (collective: the per-class counts are summed
    over the ranks). Macro-F1 is the mean of each class's ``2 TP / (2 TP + FP + FN)`` over the
    classes that occur in the split's labels or predictions (scikit-learn's
    ``f1_score(average="macro")``, which HGB reports); micro-F1, one label per vertex, is the
    accuracy."""
    sizes = len(split_sizes)
    which = torch.repeat_interleave(torch.arange(sizes), torch.tensor(split_sizes))[positions]
    base = which * classes
    ones = torch.ones(pred.numel(), dtype=torch.float64)
    counts = torch.zeros(3, sizes * classes, dtype=torch.float64)
    counts[0].index_add_(0, base + labels, (pred == labels).double())  # true positives
    counts[1].index_add_(0, base + pred, ones)  # predicted as the class
    counts[2].index_add_(0, base + labels, ones)  # labelled as the class
    if group_size(group) > 1:
        all_reduce_host(counts, group=group)
    tp, predicted, labelled = counts.view(3, sizes, classes)
    out = {}
    for k, s in enumerate(names):
        seen = (predicted[k] + labelled[k]) > 0
        f1 = 2 * tp[k][seen] / (predicted[k][seen] + labelled[k][seen])
        out[f"{s}_macro_f1"] = float(f1.mean()) if f1.numel() else float("nan")
        out[f"{s}_micro_f1"] = float(tp[k].sum()) / split_sizes[k]
    return out


def rocauc_per_split(logits: torch.Tensor, labels: torch.Tensor, positions: torch.Tensor,
                     split_sizes: list[int], names: list[str],
                     group: dist.ProcessGroup | None = None) -> dict[str, float]:
    """``<name>_rocauc`` of the positive-class probability, over every rank's rows."""
    score = torch.softmax(logits.float(), -1)[:, 1].double().cpu()
    rows = torch.stack([score, labels.cpu().double(), positions.double()], 1)
    rows = gather_rows(rows, group)
    which = torch.repeat_interleave(torch.arange(len(split_sizes)),
                                    torch.tensor(split_sizes))[rows[:, 2].long()]
    return {f"{s}_rocauc": roc_auc(rows[which == k, 0], rows[which == k, 1])
            for k, s in enumerate(names)}


def roc_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve (Mann-Whitney U, ties counted half); NaN with one class."""
    labels = labels.bool()
    pos, n = int(labels.sum()), labels.numel()
    if pos == 0 or pos == n:
        return float("nan")
    order = torch.argsort(scores.double(), stable=True)
    s = scores.double()[order]
    _, counts = torch.unique_consecutive(s, return_counts=True)
    ends = torch.cumsum(counts, 0).double()
    avg_rank = torch.repeat_interleave(ends - (counts.double() - 1) / 2, counts)
    rank_sum = float(avg_rank[labels[order]].sum())
    return (rank_sum - pos * (pos + 1) / 2) / (pos * (n - pos))


def split_sums(values: torch.Tensor, positions: torch.Tensor, split_sizes: list[int],
               group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Per split, the column sums of this rank's ``values`` rows (at ``positions`` of the
    concatenated splits), summed over the ranks of ``group``: ``[splits, columns]``."""
    which = torch.repeat_interleave(torch.arange(len(split_sizes)),
                                    torch.tensor(split_sizes))[positions]
    sums = torch.zeros(len(split_sizes), values.shape[1], dtype=torch.float64).index_add_(
        0, which, values.double())
    if group_size(group) > 1:
        all_reduce_host(sums, group=group)
    return sums
