"""Predictions of a finished run, keyed by the user's ids (``python -m gnnscale.predict``).

The run's model is rebuilt from its checkpoint on the CPU
(:class:`gnnscale.runner.finished.FinishedRun`: its config checked against the schemas, the
graph as its task prepared it) and every output row comes from the same layer-wise
full-neighbour inference the task's evaluation uses
(:func:`gnnscale.evaluation.evaluate.layerwise_logits`), so a prediction is what the run's own
evaluation scored.

* ``task=node``: per node of the target type (``split=all``, or the nodes of ``train``,
  ``val`` or ``test``), the predicted class (``pred``; ``pred_name`` too when the dataset stores
  class names, ``classes__<type>.npy``) and the probability of every class (``prob``).
* ``task=link``: the score (the decoder's logit) and probability (its sigmoid) of given pairs
  (``pairs=FILE`` of the user's ids, or ``pairs=val``/``pairs=test``: the run's own split pairs,
  with their ``label``), and the exact ``top_k`` destinations of each source (every node, or
  ``sources=FILE``) over every node: scored in chunks of ``chunk_sources`` x
  ``chunk_destinations`` pairs with a running top-k per source, so memory is bounded by the
  chunk sizes and ``k``, never ``sources x nodes``. Ties are broken by the smaller destination
  id, so the result equals a stable dense argsort.

Keys are the user's ids when the dataset's processed folder holds an
:class:`~gnnscale.data.idmap.IdMap`, else the internal ids; tables are written as Parquet or
``.npy`` (:mod:`gnnscale.runner.outputs`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig

from gnnscale.data.idmap import IdMap
from gnnscale.errors import UserError
from gnnscale.runner import outputs
from gnnscale.runner.finished import FinishedRun, dataset_folder
from gnnscale.runner.outputs import key_columns

SPLITS = ("all", "train", "val", "test")
#: pairs a decoder with weights scores at once in the top-k (its hidden rows are this many)
PAIR_BUDGET = 1 << 16


@dataclass
class Loaded:
    """A finished run's config, graph (as its task prepared it), model (CPU, eval mode), task,
    and the dataset's user ids and class names (None when it stores none)."""

    config: DictConfig
    graph: Any
    model: torch.nn.Module
    task: Any
    ids: IdMap | None
    classes: list[str] | None

    @property
    def kind(self) -> str:
        """``node`` or ``link``."""
        return getattr(self.task, "name", "node") or "node"


def run_config(run_dir: str | Path, data_root: str | None = None) -> tuple[DictConfig, Path]:
    """The config a run trained with (from its checkpoint, checked:
    :class:`~gnnscale.runner.finished.FinishedRun`) and the checkpoint's path; no checkpoint is
    a one-line :class:`UserError`."""
    run = FinishedRun.from_run(run_dir, data_root)
    return run.config, run.checkpoint


def class_names(folder: Path | None, node_type: str, num_classes: int) -> list[str] | None:
    """Class names stored beside the dataset (``classes__<type>.npy``), when they fit."""
    if folder is None:
        return None
    path = folder / f"classes__{node_type}.npy"
    if not path.is_file():
        return None
    names = np.load(path, allow_pickle=False)
    return [str(n) for n in names] if names.ndim == 1 and len(names) == num_classes else None


def load(run_dir: str | Path, data_root: str | None = None) -> Loaded:
    """Everything a prediction needs of the run in ``run_dir``."""
    run = FinishedRun.from_run(run_dir, data_root)
    graph, model, task = run.load()
    folder = dataset_folder(run.config)
    ids = IdMap.load(folder) if folder is not None and folder.is_dir() else None
    targets = tuple(graph.target_types or graph.node_types)
    classes = class_names(folder, targets[0], graph.num_classes) if targets else None
    return Loaded(run.config, graph, model, task, ids, classes)


# -- keys -------------------------------------------------------------------------------------
def to_internal(loaded: Loaded, user: np.ndarray, what: str) -> torch.Tensor:
    """Global ids of the user's ids ``user`` (a one-type graph, or the first type that has a
    map)."""
    g = loaded.graph
    node_type = g.node_types[0]
    if loaded.ids is not None and len(g.node_types) > 1:
        node_type = next((t for t in g.node_types if t in loaded.ids.node_types), node_type)
    local = outputs.internal_ids(loaded.ids, node_type, user, g.num_nodes_of(node_type), what)
    return g.to_global(node_type, torch.from_numpy(local))


# -- node classification ----------------------------------------------------------------------
def split_nodes(loaded: Loaded, split: str) -> torch.Tensor:
    """Global ids of the nodes of ``split`` (``all``: every node of the target types)."""
    g = loaded.graph
    if split not in SPLITS:
        raise UserError(f"split={split!r}: choose one of {', '.join(SPLITS)}")
    if split != "all":
        idx = getattr(g, f"{split}_idx")
        if idx is None:
            raise UserError(f"split={split}: the graph {g.name} has no {split} split")
        return idx.long()
    targets = tuple(g.target_types or g.node_types)
    return torch.cat([torch.arange(*g._range(t)) for t in targets])


def node_predictions(loaded: Loaded, split: str = "all", batch_size: int = 4096
                     ) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
    """Columns ``id``, ``pred`` (``pred_name``), ``prob`` ``[nodes, classes]`` and the names of
    ``prob``'s entries."""
    from gnnscale.evaluation.evaluate import layerwise_logits

    nodes = split_nodes(loaded, split)
    logits = layerwise_logits(loaded.model, loaded.graph, nodes, torch.device("cpu"),
                              batch_size)
    prob = torch.softmax(logits.float(), -1).numpy()
    pred = logits.argmax(-1).numpy()
    cols = {**key_columns(loaded.graph, loaded.ids, nodes), "pred": pred}
    names = loaded.classes or [str(c) for c in range(prob.shape[1])]
    if loaded.classes:
        cols["pred_name"] = np.asarray(loaded.classes)[pred]
    cols["prob"] = prob
    return cols, {"prob": names}


# -- link prediction --------------------------------------------------------------------------
def node_rows(loaded: Loaded, batch_size: int = 4096) -> torch.Tensor:
    """Every node's output row (the link task's embedding), by layer-wise inference."""
    from gnnscale.evaluation.evaluate import layerwise_logits

    g = loaded.graph
    return layerwise_logits(loaded.model, g, torch.arange(g.num_nodes), torch.device("cpu"),
                            batch_size)


def score_pairs(loaded: Loaded, rows: torch.Tensor, src: torch.Tensor, dst: torch.Tensor,
                chunk: int = PAIR_BUDGET, progress: bool = False) -> torch.Tensor:
    """The decoder's logits of pairs ``(src, dst)`` (global ids), in chunks."""
    out = []
    steps = range(0, src.numel(), chunk)
    bar = outputs.bar(len(steps), "score pairs", progress)
    with torch.no_grad():
        for lo in steps:
            out.append(loaded.task.score_pairs(rows, src[lo: lo + chunk], dst[lo: lo + chunk]))
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return torch.cat(out) if out else torch.zeros(0)


def pair_table(loaded: Loaded, rows: torch.Tensor, src: torch.Tensor, dst: torch.Tensor,
               label: torch.Tensor | None = None, progress: bool = False
               ) -> dict[str, np.ndarray]:
    """Columns ``src``, ``dst``, ``score`` (logit), ``prob`` (and ``label``)."""
    logits = score_pairs(loaded, rows, src.long(), dst.long(), progress=progress).float()
    g, ids = loaded.graph, loaded.ids
    cols = {**key_columns(g, ids, src, "src"), **key_columns(g, ids, dst, "dst"),
            "score": logits.numpy(), "prob": torch.sigmoid(logits).numpy()}
    if label is not None:
        cols["label"] = label.numpy().astype(np.int8)
    return cols


def split_pairs(loaded: Loaded, split: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(src, dst, label)`` of the run's own ``val`` or ``test`` pairs (positives, then
    negatives)."""
    todo = loaded.task.eval_pairs((split,))
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


def top_k(loaded: Loaded, rows: torch.Tensor, sources: torch.Tensor, k: int,
          chunk_sources: int = 256, chunk_destinations: int = 16384, progress: bool = False
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best-scoring destinations (global ids, over every node) of each source and
    their logits, ``[sources, k]`` each, best first (see the module docstring)."""
    from gnnscale.tasks.link.decoders import DotDecoder

    n = rows.shape[0]
    k = min(int(k), n)
    dot = isinstance(loaded.task.head, DotDecoder)
    top_v = torch.empty(sources.numel(), k)
    top_i = torch.empty(sources.numel(), k, dtype=torch.int64)
    starts = range(0, sources.numel(), chunk_sources)
    bar = outputs.bar(len(starts), f"top-{k}", progress)
    with torch.no_grad():
        for lo in starts:
            src = sources[lo: lo + chunk_sources].long()
            zs = rows[src]
            width = chunk_destinations if dot else max(1, min(chunk_destinations,
                                                              PAIR_BUDGET // src.numel()))
            best_v, best_i = torch.empty(src.numel(), 0), torch.empty(src.numel(), 0,
                                                                       dtype=torch.int64)
            for d0 in range(0, n, width):
                zd = rows[d0: d0 + width]
                if dot:
                    scores = zs @ zd.T
                else:
                    scores = loaded.task.score(zs[:, None, :], zd[None, :, :]).reshape(
                        src.numel(), zd.shape[0])
                v, i = _chunk_topk(scores.float(), k)
                best_v, best_i = _ordered(torch.cat([best_v, v], 1), torch.cat([best_i, i + d0],
                                                                                1))
                best_v, best_i = best_v[:, :k], best_i[:, :k]
            top_v[lo: lo + src.numel()], top_i[lo: lo + src.numel()] = best_v, best_i
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return top_v, top_i


def top_k_table(loaded: Loaded, rows: torch.Tensor, sources: torch.Tensor, k: int,
                progress: bool = False, **chunks: int) -> dict[str, np.ndarray]:
    """Columns ``src``, ``dst`` ``[sources, k]`` and ``score`` ``[sources, k]`` (best first)."""
    values, idx = top_k(loaded, rows, sources, k, progress=progress, **chunks)
    dst = key_columns(loaded.graph, loaded.ids, idx.reshape(-1), "dst")
    return {**key_columns(loaded.graph, loaded.ids, sources, "src"),
            **{c: v.reshape(idx.shape) for c, v in dst.items()}, "score": values.numpy()}


def read_ids(path: str | Path) -> np.ndarray:
    """Node ids from a file: ``.npy`` (1-D), or the first column of a ``.csv``/``.parquet``."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"sources={path}: no such file (a .csv, .parquet or .npy of node ids)")
    if path.suffix.lower() == ".npy":
        return np.load(path, allow_pickle=False).reshape(-1)
    if path.suffix.lower() == ".csv":
        import pyarrow.csv as pcsv

        table = pcsv.read_csv(path)
    elif path.suffix.lower() in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        table = pq.read_table(path)
    else:
        raise UserError(f"sources={path}: read .csv, .parquet or .npy files")
    return table.column(0).to_numpy(zero_copy_only=False)


# -- the whole prediction ---------------------------------------------------------------------
def predict_loaded(loaded: Loaded, out: str | Path | None = None, format: str = "parquet",
                   split: str = "all", pairs: Any = None, top_k: int = 0, sources: Any = None,
                   batch_size: int = 4096, chunk_sources: int = 256,
                   chunk_destinations: int = 16384, progress: bool | None = None
                   ) -> dict[str, dict[str, np.ndarray]]:
    """The tables of a prediction (``nodes``; ``pairs``, ``top_k``), written under ``out``
    when given (see the module docstring); returns them as columns."""
    outputs.check_format(format)
    bars = outputs.show_progress(progress)
    tables: dict[str, dict[str, np.ndarray]] = {}
    names: dict[str, dict[str, list[str]]] = {}
    if loaded.kind == "link":
        if pairs is None and not top_k:
            raise UserError("task=link predicts pairs: give pairs=FILE (or pairs=val|test) "
                            "and/or top_k=K")
        rows = node_rows(loaded, batch_size)
        if pairs is not None:
            if isinstance(pairs, str) and pairs in ("val", "test"):
                src, dst, label = split_pairs(loaded, pairs)
            else:
                usrc, udst = pairs if isinstance(pairs, tuple) else outputs.read_pairs(pairs)
                src, dst = to_internal(loaded, usrc, "pairs"), to_internal(loaded, udst, "pairs")
                label = None
            tables["pairs"] = pair_table(loaded, rows, src, dst, label, bars)
        if top_k:
            if top_k < 1:
                raise UserError(f"top_k={top_k}: give a positive number of destinations")
            srcs = (torch.arange(loaded.graph.num_nodes) if sources is None else
                    to_internal(loaded, read_ids(sources) if isinstance(sources, (str, Path))
                                else np.asarray(sources), "sources"))
            tables["top_k"] = top_k_table(loaded, rows, srcs, top_k, bars,
                                          chunk_sources=chunk_sources,
                                          chunk_destinations=chunk_destinations)
    else:
        if pairs is not None or top_k:
            raise UserError("pairs= and top_k= are link prediction's: this run's task is node "
                            "classification (it predicts per node: split=all|train|val|test)")
        tables["nodes"], names["nodes"] = node_predictions(loaded, split, batch_size)
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = {name: str(outputs.write_table(out, name, cols, format, names.get(name)))
                 for name, cols in tables.items()}
        (out / "predictions.json").write_text(json.dumps(
            {"task": loaded.kind, "format": format, "tables": paths,
             "keys": "user ids" if loaded.ids is not None else "internal ids"}, indent=1))
    return tables


def predict(run_dir: str | Path, out: str | Path | None = None, data_root: str | None = None,
            **options: Any) -> dict[str, dict[str, np.ndarray]]:
    """:func:`predict_loaded` on the run in ``run_dir`` (``out`` default
    ``<run_dir>/predictions``)."""
    loaded = load(run_dir, data_root)
    return predict_loaded(loaded, Path(run_dir) / "predictions" if out is None else out,
                          **options)
