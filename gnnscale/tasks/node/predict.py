"""Node classification's predictions (``NodeTask.predict``): per node of the target types
(``split=all``, or the nodes of ``train``, ``val`` or ``test``), the predicted class (``pred``;
``pred_name`` too when the dataset stores class names) and the probability of every class
(``prob``), from the layer-wise full-neighbour inference the task's evaluation scores."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from gnnscale.data.graph import GraphStore
from gnnscale.errors import UserError
from gnnscale.tasks.base import Predicted, Predicting

SPLITS = ("all", "train", "val", "test")


def split_nodes(g: GraphStore, split: str) -> torch.Tensor:
    """Global ids of the nodes of ``split`` (``all``: every node of the target types)."""
    if split not in SPLITS:
        raise UserError(f"split={split!r}: choose one of {', '.join(SPLITS)}")
    if split != "all":
        idx = getattr(g, f"{split}_idx")
        if idx is None:
            raise UserError(f"split={split}: the graph {g.name} has no {split} split")
        return idx.long()
    targets = tuple(g.target_types or g.node_types)
    return torch.cat([torch.arange(*g._range(t)) for t in targets])


def predict(on: Predicting, split: str = "all", pairs: Any = None, top_k: int = 0,
            **_: Any) -> Predicted:
    """Table ``nodes``: columns ``id`` (``id_type``), ``pred`` (``pred_name``), ``prob``
    ``[nodes, classes]``, and the names of ``prob``'s entries (the class names, else the class
    numbers). ``pairs``/``top_k`` are refused: they ask for pairs of nodes."""
    from gnnscale.evaluation.evaluate import layerwise_logits

    if pairs is not None or top_k:
        raise UserError("pairs= and top_k= are link prediction's: this run's task is node "
                        "classification (it predicts per node: split=all|train|val|test)")
    nodes = split_nodes(on.graph, split)
    logits = layerwise_logits(on.model, on.graph, nodes, torch.device("cpu"), on.batch_size)
    prob = torch.softmax(logits.float(), -1).numpy()
    pred = logits.argmax(-1).numpy()
    cols = {**on.keys(nodes, "id"), "pred": pred}
    names = on.classes or [str(c) for c in range(prob.shape[1])]
    if on.classes:
        cols["pred_name"] = np.array(on.classes, dtype=object)[pred]  # NULs kept
    cols["prob"] = prob
    return {"nodes": cols}, {"nodes": {"prob": names}}
