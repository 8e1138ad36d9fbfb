"""Checks on a freshly processed graph that turn silently wrong training into clear errors.

Run once, when a dataset is processed (before it is saved): finite features and edge
features, finite and
non-negative edge weights (the native sampler's check lets +inf through), disjoint splits,
every split vertex labelled with a class in ``[0, num_classes)``, and a class count that the
labels back: above the largest label, and at most ``max(1000, 10 * (largest label + 1))``
(more classes only inflate the output layer; see :func:`class_limit`). A tolerable oddity
(classes without any vertex) is a warning saying what was assumed. Problems are
:class:`~gnnscale.errors.ConfigError` naming the dataset (or file) and what to change.
"""

from __future__ import annotations

import warnings

import torch

from gnnscale.data.graph import GraphStore
from gnnscale.data.pages import release
from gnnscale.errors import ConfigError

SPLITS = ("train", "val", "test")


#: bytes of features checked at a time (no temporary of the whole matrix's size; the
#: check's temporaries take about twice a chunk)
CHECK_CHUNK_BYTES = 8 << 20


def check_features(x: torch.Tensor | None, where: str, what: str = "x") -> None:
    """Features must be finite: a NaN or Inf trains to a NaN loss (checked a row chunk at a
    time)."""
    if x is None or not x.is_floating_point():
        return
    from gnnscale.data.bounded import FINITE, trim

    if FINITE.get(id(x)) is x:  # streamed to disk and checked chunk by chunk as it was
        return
    row_bytes = max(1, x[0].numel() * x.element_size()) if x.dim() and x.shape[0] else 1
    step = max(1, CHECK_CHUNK_BYTES // row_bytes)
    values = rows = 0
    first = None
    bad: torch.Tensor | None = None
    for a in range(0, x.shape[0] if x.dim() else 1, step):
        bad = ~torch.isfinite(x[a:a + step] if x.dim() else x)
        release(x, a, a + step)  # a mapped file's pages given back once read
        if not bool(bad.any()):
            continue
        per_row = bad.any(dim=1) if bad.dim() == 2 else bad
        values, rows = values + int(bad.sum()), rows + int(per_row.sum())
        first = a + int(per_row.nonzero()[0]) if first is None else first
    bad = None
    trim()  # the chunks' temporaries, kept by the allocator otherwise
    if first is not None:
        raise ConfigError(f"{where}: {what} holds {values} NaN/Inf values in "
                          f"{rows} rows (first: row {first}); replace them, e.g. "
                          "with 0 or the column mean, before training")


def check_edge_weight(w: torch.Tensor | None, where: str) -> None:
    """Edge weights must be finite and >= 0: sampling draws in-neighbours in proportion to
    them (NaN and negative ones fail only when sampling, +inf silently takes every draw)."""
    if w is None or not w.is_floating_point():
        return
    count, first = 0, None
    for a in range(0, w.numel(), CHECK_CHUNK_BYTES // 4):  # a chunk at a time
        part = w[a:a + CHECK_CHUNK_BYTES // 4]
        bad = ~torch.isfinite(part) | (part < 0)
        release(w, a, a + part.numel())
        if bool(bad.any()):
            count += int(bad.sum())
            first = a + int(bad.nonzero()[0]) if first is None else first
    if first is not None:
        raise ConfigError(f"{where}: edge_weight holds {count} values that are NaN, "
                          f"infinite or negative (first: edge {first}, {float(w[first])}); "
                          "edge weights must be finite and >= 0")


def check_splits(graph: GraphStore, where: str) -> None:
    """Splits must not overlap."""
    seen = torch.zeros(graph.num_nodes, dtype=torch.int8)
    for s in SPLITS:
        idx = getattr(graph, f"{s}_idx")
        if idx is None:
            continue
        if torch.unique(idx).numel() != idx.numel():
            raise ConfigError(f"{where}: the {s} split lists some vertices twice")
        overlap = seen[idx] != 0
        if bool(overlap.any()):
            other = SPLITS[int(seen[idx[overlap][0]]) - 1]
            raise ConfigError(f"{where}: {int(overlap.sum())} vertices are in both the {other} "
                              f"and the {s} split (first: vertex {int(idx[overlap][0])}); "
                              "splits must be disjoint")
        seen[idx] = SPLITS.index(s) + 1


def class_limit(max_label: int) -> int:
    """The most classes a graph whose largest label is ``max_label`` may declare."""
    return max(1000, 10 * (max_label + 1))


def check_num_classes(num_classes: int, max_label: int, where: str) -> None:
    """Refuse a negative or absurd class count (more than :func:`class_limit`)."""
    limit = class_limit(max_label)
    if num_classes < 0 or num_classes > limit:
        labels = f"the largest label is {max_label}" if max_label >= 0 else "there are no labels"
        raise ConfigError(f"{where}: num_classes = {num_classes} but {labels}: between "
                          f"{max_label + 1} and max(1000, 10 x (largest label + 1)) = {limit} "
                          f"classes are accepted; give num_classes = {max(max_label + 1, 0)} "
                          "or leave it out")


def check_labels(graph: GraphStore, where: str, inferred_classes: bool = False) -> None:
    """Every split vertex has a label in ``[0, num_classes)``; the classes are backed."""
    largest = int(graph.y.max()) if graph.y is not None and graph.y.numel() else -1
    check_num_classes(graph.num_classes, largest, where)
    if graph.y is None:
        return
    for s in SPLITS:
        idx = getattr(graph, f"{s}_idx")
        if idx is None or not idx.numel():
            continue
        y = graph.y[idx]
        unlabelled = int((y < 0).sum())
        if unlabelled:
            raise ConfigError(f"{where}: {unlabelled} vertices of the {s} split have no label "
                              "(y < 0); leave unlabelled vertices out of every split")
        top = int(y.max())
        if top >= graph.num_classes:
            raise ConfigError(f"{where}: the {s} split has label {top} but num_classes = "
                              f"{graph.num_classes}: labels must lie in [0, num_classes)")
    if largest >= graph.num_classes:
        vertex = int((graph.y == largest).nonzero()[0])
        raise ConfigError(f"{where}: vertex {vertex} (in no split) has label {largest} but "
                          f"num_classes = {graph.num_classes}: labels must lie in "
                          f"[0, num_classes); give num_classes > {largest} or leave it out")
    labelled = graph.y[graph.y >= 0]
    present = int(torch.unique(labelled).numel()) if labelled.numel() else 0
    empty = graph.num_classes - present
    if not inferred_classes or empty <= 0:
        return
    if empty > present:
        raise ConfigError(
            f"{where}: the largest label is {graph.num_classes - 1}, so {graph.num_classes} "
            f"classes would be assumed, but only {present} distinct labels occur: relabel the "
            "classes as 0..K-1, or give num_classes explicitly"
        )
    warnings.warn(f"{where}: assuming {graph.num_classes} classes (the largest label + 1); "
                  f"{empty} of them have no vertex", stacklevel=2)


def check_task(graph: GraphStore, where: str, inferred_classes: bool = False) -> None:
    """All the checks above; ``where`` (a file or dataset name) starts every message."""
    check_features(graph.x, where)
    for t, f in graph.type_features.items():
        check_features(f, f"{where} ({t} nodes)")
    check_features(graph.edge_attr, where, "edge_attr")
    for et, a in graph.type_edge_attr.items():
        check_features(a, f"{where} ({et} edges)", "edge_attr")
    check_edge_weight(graph.edge_weight, where)
    check_splits(graph, where)
    check_labels(graph, where, inferred_classes)
