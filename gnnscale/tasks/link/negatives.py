"""Negative pairs for link prediction, drawn by the native sampler (``csrc/sampling/``).

A positive's negatives are keyed by its global id (its column in ``train_pos``, ``val_pos``
or ``test_pos``) and a seed: the same pairs on any number of ranks, in any batch. ``uniform``
draws both endpoints uniformly over the nodes; ``per_source`` keeps the positive's source and
draws the target (the corruption OGB ranks for MRR); for a typed edge type a drawn endpoint
can be kept in its node type's id range (``src_range``/``dst_range``, :func:`type_ranges`:
the link task's negatives of its target edge type). With a graph to avoid, a negative is never a
self loop nor one of its edges (redrawn up to :data:`EXCLUDE_TRIES` times); the edge test
probes a hash of the graph's edges (:func:`exclusion`) where it fits in
:data:`TABLE_BYTES`, else searches the sorted in-neighbours: the same negatives either way.
"""

from __future__ import annotations

import torch

from gnnscale.ops.sampling import edge_key_table, negative_sample

EXCLUDE_TRIES = 64
TABLE_BYTES = 1 << 28  # largest edge hash built (16 bytes an edge at most): 16M+ edges search
KINDS = ("uniform", "per_source")


def sorted_csc(indptr: torch.Tensor, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(indptr, indices)`` with each vertex's in-neighbours ascending (what the sampler's
    edge test searches); the same tensors when they already are."""
    n = indptr.numel() - 1
    if indices.numel() < 2:
        return indptr, indices
    starts = torch.zeros(indices.numel(), dtype=torch.bool)
    starts[indptr[:-1][indptr[:-1] < indices.numel()]] = True
    if bool(((indices[1:] > indices[:-1]) | starts[1:]).all()):
        return indptr, indices
    dst = torch.repeat_interleave(torch.arange(n), indptr[1:] - indptr[:-1])
    order = torch.argsort(dst * n + indices.long())
    return indptr, indices[order].contiguous()


def exclusion(indptr: torch.Tensor, indices: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """What :func:`draw` avoids, built once per graph: ``(indptr, indices, table)``, the CSC
    graph with in-neighbours ascending (:func:`sorted_csc`) and its edge hash
    (:func:`~gnnscale.ops.sampling.edge_key_table`; None above :data:`TABLE_BYTES`)."""
    indptr, indices = sorted_csc(indptr, indices)
    slots = 1 << max(1, (2 * indices.numel() - 1).bit_length())
    table = edge_key_table(indptr, indices) if 8 * slots <= TABLE_BYTES else None
    return indptr, indices, table


def draw(num_nodes: int, sources: torch.Tensor, keys: torch.Tensor, k: int, kind: str,
         seed: int, indptr: torch.Tensor | None = None, indices: torch.Tensor | None = None,
         table: torch.Tensor | None = None, src_range: tuple[int, int] | None = None,
         dst_range: tuple[int, int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``k`` negatives per key: ``(src, dst)``, those of key ``i`` at ``[i * k, (i + 1) * k)``;
    ``sources`` are the positives' sources (kept under ``per_source``); ``indptr``/``indices``
    (a CSC graph, in-neighbours ascending) the edges to avoid, or None; ``table`` their
    hash (:func:`exclusion`), or None to search. ``src_range`` / ``dst_range`` ``(lo, hi)``
    keep a drawn source / target in ``[lo, hi)``: on a typed graph the global id ranges of
    the edge type's source and destination node types (:func:`type_ranges`); None: all
    nodes."""
    if kind not in KINDS:
        raise ValueError(f"negative kind must be one of {KINDS}, got {kind!r}")
    return negative_sample(num_nodes, keys, k, seed,
                           sources=sources if kind == "per_source" else None,
                           indptr=indptr, indices=indices, max_tries=EXCLUDE_TRIES,
                           edge_table=table, src_range=src_range, dst_range=dst_range)


def type_ranges(node_type_offset: torch.Tensor, node_types: tuple[str, ...],
                edge_type: tuple[str, str, str]) -> tuple[tuple[int, int], tuple[int, int]]:
    """The global id ranges ``(src_range, dst_range)`` of ``edge_type``'s source and
    destination node types (a typed graph's ``node_type_offset`` and ``node_types``): what
    :func:`draw` keeps typed negatives in."""
    off = node_type_offset.tolist()

    def span(node_type: str) -> tuple[int, int]:
        t = node_types.index(node_type)
        return int(off[t]), int(off[t + 1])

    return span(edge_type[0]), span(edge_type[2])
