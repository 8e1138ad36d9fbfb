"""Checks on a freshly processed graph that turn silently wrong training into clear errors.

Run once, when a dataset is processed (before it is saved): finite features, disjoint splits,
every split vertex labelled with a class in ``[0, num_classes)``, and a class count that the
labels back. A tolerable oddity (classes without any vertex) is a warning saying what was
assumed.
"""

from __future__ import annotations

import warnings

import torch

from gnnscale.data.graph import GraphStore

SPLITS = ("train", "val", "test")


def check_features(x: torch.Tensor | None, where: str) -> None:
    """Features must be finite: a NaN or Inf trains to a NaN loss."""
    if x is None or not x.is_floating_point():
        return
    bad = ~torch.isfinite(x)
    if bool(bad.any()):
        rows = bad.any(dim=1) if bad.dim() == 2 else bad
        first = int(rows.nonzero()[0])
        raise ValueError(f"{where}: x holds {int(bad.sum())} NaN/Inf values in "
                         f"{int(rows.sum())} rows (first: row {first}); replace them, e.g. "
                         "with 0 or the column mean, before training")


def check_splits(graph: GraphStore, where: str) -> None:
    """Splits must not overlap."""
    seen = torch.zeros(graph.num_nodes, dtype=torch.int8)
    for s in SPLITS:
        idx = getattr(graph, f"{s}_idx")
        if idx is None:
            continue
        if torch.unique(idx).numel() != idx.numel():
            raise ValueError(f"{where}: the {s} split lists some vertices twice")
        overlap = seen[idx] != 0
        if bool(overlap.any()):
            other = SPLITS[int(seen[idx[overlap][0]]) - 1]
            raise ValueError(f"{where}: {int(overlap.sum())} vertices are in both the {other} "
                             f"and the {s} split (first: vertex {int(idx[overlap][0])}); "
                             "splits must be disjoint")
        seen[idx] = SPLITS.index(s) + 1


def check_labels(graph: GraphStore, where: str, inferred_classes: bool = False) -> None:
    """Every split vertex has a label in ``[0, num_classes)``; the classes are backed."""
    if graph.y is None:
        return
    for s in SPLITS:
        idx = getattr(graph, f"{s}_idx")
        if idx is None or not idx.numel():
            continue
        y = graph.y[idx]
        unlabelled = int((y < 0).sum())
        if unlabelled:
            raise ValueError(f"{where}: {unlabelled} vertices of the {s} split have no label "
                             "(y < 0); leave unlabelled vertices out of every split")
        top = int(y.max())
        if top >= graph.num_classes:
            raise ValueError(f"{where}: the {s} split has label {top} but num_classes = "
                             f"{graph.num_classes}: labels must lie in [0, num_classes)")
    labelled = graph.y[graph.y >= 0]
    present = int(torch.unique(labelled).numel()) if labelled.numel() else 0
    empty = graph.num_classes - present
    if not inferred_classes or empty <= 0:
        return
    if empty > present:
        raise ValueError(
            f"{where}: the largest label is {graph.num_classes - 1}, so {graph.num_classes} "
            f"classes would be assumed, but only {present} distinct labels occur: relabel the "
            "classes as 0..K-1, or give num_classes explicitly"
        )
    warnings.warn(f"{where}: assuming {graph.num_classes} classes (the largest label + 1); "
                  f"{empty} of them have no vertex", stacklevel=2)


def check_task(graph: GraphStore, where: str, inferred_classes: bool = False) -> None:
    """All the checks above; ``where`` (a file or dataset name) starts every message."""
    check_features(graph.x, where)
    check_splits(graph, where)
    check_labels(graph, where, inferred_classes)
