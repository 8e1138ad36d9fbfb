"""Link prediction's predictions (``LinkTask.predict``), from every node's output row by the
layer-wise full-neighbour inference the task's evaluation scores:

* ``pairs``: the score (the decoder's logit) and probability (its sigmoid) of given pairs
  (``pairs=FILE`` of the user's ids, or ``pairs=val``/``pairs=test``: the run's own split
  pairs, with their ``label``);
* ``top_k``: the exact ``top_k`` destinations of each source (every node, or ``sources=FILE``)
  over every node: scored in chunks of ``chunk_sources`` x ``chunk_destinations`` pairs with a
  running top-k per source, so memory is bounded by the chunk sizes and ``k``, never
  ``sources x nodes``. Ties are broken by the smaller destination id, so the result equals a
  stable dense argsort.

On a typed graph the pairs are of the task's edge type ``(s, r, d)``: the user's ids of a pairs
file are of ``s`` (sources) and ``d`` (destinations), ``sources=`` are ids of ``s`` (default
every node of ``s``), the top-k ranks the nodes of ``d`` only, and both tables carry the types
(``src_type``, ``dst_type``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gnnscale.data.graph import GraphStore
from gnnscale.errors import UserError
from gnnscale.tasks.base import Columns, Predicted, Predicting

if TYPE_CHECKING:
    from gnnscale.models.base import GNN

#: pairs a decoder with weights scores at once in the top-k (its hidden rows are this many)
PAIR_BUDGET = 1 << 16

#: a progress bar maker, ``bar(total, desc)`` (None: no bar), as :class:`Predicting` gives
Bar = Callable[[int, str], Any] | None


def node_rows(model: GNN, graph: GraphStore, batch_size: int = 4096) -> torch.Tensor:
    """Every node's output row (the link task's embedding), by layer-wise inference."""
    from gnnscale.evaluation.evaluate import layerwise_logits

    return layerwise_logits(model, graph, torch.arange(graph.num_nodes), torch.device("cpu"),
                            batch_size)


def _progress(bar: Bar, total: int, desc: str) -> Any:
    return bar(total, desc) if bar is not None else None


def score_pairs(task: Any, rows: torch.Tensor, src: torch.Tensor, dst: torch.Tensor,
                chunk: int = PAIR_BUDGET, bar: Bar = None) -> torch.Tensor:
    """The decoder's logits of pairs ``(src, dst)`` (global ids), in chunks."""
    out = []
    steps = range(0, src.numel(), chunk)
    shown = _progress(bar, len(steps), "score pairs")
    with torch.no_grad():
        for lo in steps:
            out.append(task.score_pairs(rows, src[lo: lo + chunk], dst[lo: lo + chunk]))
            if shown is not None:
                shown.update(1)
    if shown is not None:
        shown.close()
    return torch.cat(out) if out else torch.zeros(0)


def endpoint_types(task: Any, graph: GraphStore) -> tuple[str | None, str | None]:
    """The source and destination node types of the task's edge type on a typed graph;
    ``(None, None)`` on a homogeneous one."""
    edge_type = getattr(task, "edge_type", None)
    if not graph.is_typed or edge_type is None:
        return None, None
    return edge_type[0], edge_type[2]


def keyed(on: Predicting, nodes: torch.Tensor, name: str, node_type: str | None) -> Columns:
    """The key columns of ``nodes``: ``name`` (and, of a node type, ``<name>_type`` first,
    one entry per row of ``nodes``' first dimension)."""
    cols = on.keys(nodes.reshape(-1), name)
    if node_type is None:
        return cols
    return {f"{name}_type": np.full(nodes.shape[0], node_type),
            name: cols[name].reshape(nodes.shape)}


def pair_table(task: Any, on: Predicting, rows: torch.Tensor, src: torch.Tensor,
               dst: torch.Tensor, label: torch.Tensor | None = None) -> Columns:
    """Columns ``src``, ``dst`` (``src_type``, ``dst_type`` on a typed graph), ``score``
    (logit), ``prob`` (and ``label``)."""
    logits = score_pairs(task, rows, src.long(), dst.long(), bar=on.bar).float()
    src_t, dst_t = endpoint_types(task, on.graph)
    cols = {**keyed(on, src.long(), "src", src_t), **keyed(on, dst.long(), "dst", dst_t),
            "score": logits.numpy(), "prob": torch.sigmoid(logits).numpy()}
    if label is not None:
        cols["label"] = label.numpy().astype(np.int8)
    return cols


def split_pairs(task: Any, split: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(src, dst, label)`` of the run's own ``val`` or ``test`` pairs (positives, then
    negatives)."""
    todo = task.eval_pairs((split,))
    if not todo:
        raise UserError(f"pairs={split}: the run's link split has no {split} pairs")
    _, pos, neg = todo[0]
    label = torch.cat([torch.ones(pos.shape[1]), torch.zeros(neg.shape[1])])
    return torch.cat([pos[0], neg[0]]), torch.cat([pos[1], neg[1]]), label


def _ordered(values: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row sorted by value, descending, ties by the smaller id."""
    by_id = torch.argsort(ids, dim=1, stable=True)
    values, ids = values.gather(1, by_id), ids.gather(1, by_id)
    order = torch.sort(values, dim=1, descending=True, stable=True).indices
    return values.gather(1, order), ids.gather(1, order)


def _chunk_topk(scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` largest of each row (column positions), ties by the smaller position: a
    plain top-k, with the rows whose k-th value ties beyond the chosen ones sorted stably."""
    if k >= scores.shape[1]:
        order = torch.sort(scores, dim=1, descending=True, stable=True)
        return order.values, order.indices
    values, idx = torch.topk(scores, k, dim=1)
    kth = values[:, -1:]
    tied = (scores >= kth).sum(1) > k  # a tie at the boundary: which ones is not settled
    if bool(tied.any()):
        rows = tied.nonzero().reshape(-1)
        order = torch.sort(scores[rows], dim=1, descending=True, stable=True)
        values[rows], idx[rows] = order.values[:, :k], order.indices[:, :k]
    return _ordered(values, idx)


def top_k(task: Any, rows: torch.Tensor, sources: torch.Tensor, k: int,
          chunk_sources: int = 256, chunk_destinations: int = 16384, bar: Bar = None,
          destinations: tuple[int, int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best-scoring destinations (global ids, over the nodes ``[lo, hi)`` of
    ``destinations``; default every node) of each source and their logits, ``[sources, k]``
    each, best first (see the module docstring)."""
    from gnnscale.tasks.link.decoders import DotDecoder

    lo_d, n = (0, rows.shape[0]) if destinations is None else destinations
    k = min(int(k), n - lo_d)
    dot = isinstance(task.head, DotDecoder)
    top_v = torch.empty(sources.numel(), k)
    top_i = torch.empty(sources.numel(), k, dtype=torch.int64)
    starts = range(0, sources.numel(), chunk_sources)
    shown = _progress(bar, len(starts), f"top-{k}")
    with torch.no_grad():
        for lo in starts:
            src = sources[lo: lo + chunk_sources].long()
            zs = rows[src]
            width = chunk_destinations if dot else max(1, min(chunk_destinations,
                                                              PAIR_BUDGET // src.numel()))
            best_v, best_i = torch.empty(src.numel(), 0), torch.empty(src.numel(), 0,
                                                                       dtype=torch.int64)
            for d0 in range(lo_d, n, width):
                zd = rows[d0: min(d0 + width, n)]
                if dot:
                    scores = zs @ zd.T
                else:
                    scores = task.score(zs[:, None, :], zd[None, :, :]).reshape(
                        src.numel(), zd.shape[0])
                v, i = _chunk_topk(scores.float(), k)
                best_v, best_i = _ordered(torch.cat([best_v, v], 1), torch.cat([best_i, i + d0],
                                                                                1))
                best_v, best_i = best_v[:, :k], best_i[:, :k]
            top_v[lo: lo + src.numel()], top_i[lo: lo + src.numel()] = best_v, best_i
            if shown is not None:
                shown.update(1)
    if shown is not None:
        shown.close()
    return top_v, top_i


def top_k_table(task: Any, on: Predicting, rows: torch.Tensor, sources: torch.Tensor, k: int,
                **chunks: int) -> Columns:
    """Columns ``src``, ``dst`` ``[sources, k]`` and ``score`` ``[sources, k]`` (best first);
    on a typed graph ``src_type`` and ``dst_type`` (one per source) too, the destinations
    ranked among the nodes of the edge type's destination type only."""
    src_t, dst_t = endpoint_types(task, on.graph)
    within = on.graph._range(dst_t) if dst_t is not None else None
    values, idx = top_k(task, rows, sources, k, bar=on.bar, destinations=within, **chunks)
    if dst_t is None:
        dst = on.keys(idx.reshape(-1), "dst")
        return {**on.keys(sources, "src"), **{c: v.reshape(idx.shape) for c, v in dst.items()},
                "score": values.numpy()}
    return {**keyed(on, sources.long(), "src", src_t), **keyed(on, idx, "dst", dst_t),
            "score": values.numpy()}


def predict(task: Any, on: Predicting, pairs: Any = None, top_k: int = 0, sources: Any = None,
            chunk_sources: int = 256, chunk_destinations: int = 16384, **_: Any) -> Predicted:
    """Tables ``pairs`` (given ``pairs``) and ``top_k`` (given ``top_k``; at least one is
    needed); see the module docstring."""
    if pairs is None and not top_k:
        raise UserError("task=link predicts pairs: give pairs=FILE (or pairs=val|test) "
                        "and/or top_k=K")
    rows = node_rows(on.model, on.graph, on.batch_size)
    src_t, dst_t = endpoint_types(task, on.graph)
    tables: dict[str, Columns] = {}
    if pairs is not None:
        if isinstance(pairs, str) and pairs in ("val", "test"):
            src, dst, label = split_pairs(task, pairs)
        else:
            usrc, udst = on.pairs_of(pairs)
            src, dst = on.nodes_of(usrc, "pairs", src_t), on.nodes_of(udst, "pairs", dst_t)
            label = None
        tables["pairs"] = pair_table(task, on, rows, src, dst, label)
    if top_k:
        if top_k < 1:
            raise UserError(f"top_k={top_k}: give a positive number of destinations")
        if sources is not None:
            srcs = on.nodes_of(sources, "sources", src_t)
        else:
            srcs = torch.arange(*(on.graph._range(src_t) if src_t is not None else
                                  (0, on.graph.num_nodes)))
        tables["top_k"] = top_k_table(task, on, rows, srcs, top_k, chunk_sources=chunk_sources,
                                      chunk_destinations=chunk_destinations)
    return tables, {}
