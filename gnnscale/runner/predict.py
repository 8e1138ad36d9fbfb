"""Predictions of a finished run, keyed by the user's ids (``python -m gnnscale.predict``).

The run's model is rebuilt from its checkpoint on the CPU
(:class:`gnnscale.runner.finished.FinishedRun`: its config checked against the schemas, the
graph as its task prepared it) and its task writes the tables (:meth:`Task.predict
<gnnscale.tasks.base.Task.predict>`, given a :class:`~gnnscale.tasks.base.Predicting`): each
output row comes from the same layer-wise full-neighbour inference the task's evaluation uses
(:func:`gnnscale.evaluation.evaluate.layerwise_logits`), so a prediction is what the run's own
evaluation scored. This module knows no task: it loads the run, keys ids, passes the request's
options to the task and writes what it returns.

* ``task=node`` (:mod:`gnnscale.tasks.node.predict`): per node of the target type
  (``split=all``, or the nodes of ``train``, ``val`` or ``test``), the predicted class
  (``pred``; ``pred_name`` too when the dataset stores class names)
  and the probability of every class (``prob``).
* ``task=link`` (:mod:`gnnscale.tasks.link.predict`): the score (the decoder's logit) and
  probability (its sigmoid) of given pairs (``pairs=FILE`` of the user's ids, or
  ``pairs=val``/``pairs=test``: the run's own split pairs, with their ``label``), and the exact
  ``top_k`` destinations of each source (every node, or ``sources=FILE``), in bounded memory,
  ties broken by the smaller destination id.

Keys are the user's ids when the dataset's processed folder holds an
:class:`~gnnscale.data.idmap.IdMap`, else the internal ids; tables are written as Parquet or
``.npy`` (:mod:`gnnscale.runner.outputs`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from omegaconf import DictConfig

from gnnscale.data.idmap import IdMap
from gnnscale.errors import UserError
from gnnscale.runner import outputs
from gnnscale.runner.finished import FinishedRun, dataset_folder
from gnnscale.runner.outputs import key_columns
from gnnscale.tasks.base import Predicting
from gnnscale.tasks.config import DEFAULT

if TYPE_CHECKING:
    from gnnscale.models.base import GNN


@dataclass
class Loaded:
    """A finished run's config, graph (as its task prepared it), model (CPU, eval mode), task,
    and the dataset's user ids and class names (None when it stores none)."""

    config: DictConfig
    graph: Any
    model: GNN
    task: Any
    ids: IdMap | None
    classes: list[str] | None

    @property
    def kind(self) -> str:
        """Its task's option name (``node``, ``link``, ...)."""
        return getattr(self.task, "name", DEFAULT) or DEFAULT


def class_names(folder: Path | None, node_type: str, num_classes: int) -> list[str] | None:
    """Class names stored beside the dataset (:meth:`IdMap.class_names`: exact, NUL characters
    kept), when they fit."""
    ids = IdMap.load(folder) if folder is not None and folder.is_dir() else None
    names = None if ids is None else ids.class_names(node_type)
    return [str(n) for n in names] if names is not None and len(names) == num_classes else None


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
def to_internal(loaded: Loaded, user: np.ndarray, what: str, node_type: str | None = None
                ) -> torch.Tensor:
    """Global ids of the user's ids ``user`` of ``node_type`` (None: a one-type graph's type,
    or the first type that has a map)."""
    g = loaded.graph
    if node_type is None:
        node_type = g.node_types[0]
        if loaded.ids is not None and len(g.node_types) > 1:
            node_type = next((t for t in g.node_types if t in loaded.ids.node_types), node_type)
    local = outputs.internal_ids(loaded.ids, node_type, user, g.num_nodes_of(node_type), what)
    return g.to_global(node_type, torch.from_numpy(local))


def nodes_of(loaded: Loaded, value: Any, what: str, node_type: str | None = None
             ) -> torch.Tensor:
    """Global ids of the user's ids ``value``: an array, or a file of them
    (:func:`read_ids`)."""
    user = read_ids(value) if isinstance(value, (str, Path)) else np.asarray(value)
    return to_internal(loaded, user, what, node_type)


def predicting(loaded: Loaded, batch_size: int = 4096, progress: bool = False) -> Predicting:
    """What the run's task predicts from: its model and graph, and this module's keying of
    ids (the user's, from the dataset's IdMap)."""
    g, ids = loaded.graph, loaded.ids
    return Predicting(
        model=loaded.model, graph=g, classes=loaded.classes, batch_size=batch_size,
        progress=progress, keys=lambda nodes, name: key_columns(g, ids, nodes, name),
        nodes_of=partial(nodes_of, loaded),
        pairs_of=lambda value: value if isinstance(value, tuple) else outputs.read_pairs(value),
        bar=lambda total, desc: outputs.bar(total, desc, progress))


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
def predict_loaded(loaded: Loaded, out: str | os.PathLike | None = None, format: str = "parquet",
                   batch_size: int = 4096, progress: bool | None = None, **options: Any
                   ) -> dict[str, dict[str, np.ndarray]]:
    """The tables of the run's task's predictions for the request ``options`` (each task's
    own: ``split=`` for node classification; ``pairs=``, ``top_k=``, ``sources=``,
    ``chunk_sources=``, ``chunk_destinations=`` for link prediction), written under ``out``
    when given, with ``predictions.json``; returns them as columns. The features are read as
    the run trained on them (``cache.feature_dtype``: :func:`~gnnscale.evaluation.evaluate.
    served_dtype`), so a prediction is what the run's own evaluation computed."""
    from gnnscale.evaluation.evaluate import features_as, served_dtype

    outputs.check_format(format)
    on = predicting(loaded, batch_size, outputs.show_progress(progress))
    with features_as(served_dtype(loaded.config)):
        tables, names = loaded.task.predict(on, **options)
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
