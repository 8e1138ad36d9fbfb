"""Footprint similarity (FGNN Table 2): how alike two consecutive epochs' samples are.

The share of the ``top`` (10%) most visited vertices of one epoch that are also among the
``top`` most visited of the next, where a visit is a vertex being an input node of a
micro-batch. High similarity is what makes a static, pre-sampled cache (PreSC) work. One
implementation serves the run metric (``footprint=true``, any sampling strategy) and the
``factored`` benchmark.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

TOP = 0.1  # FGNN's definition: the 10% most visited vertices


def top_visited(counts: torch.Tensor, top: float = TOP) -> torch.Tensor:
    """Ids of the ``top`` share (at least one) most visited vertices, ties to the lower id."""
    if not 0.0 < top <= 1.0:
        raise ValueError(f"top must lie in (0, 1], got {top}")
    k = max(1, int(top * counts.numel()))
    return torch.argsort(counts, descending=True, stable=True)[:k]


def footprint_similarity(before: torch.Tensor, after: torch.Tensor, top: float = TOP) -> float:
    """Share of ``before``'s top-visited vertices among ``after``'s (visit counts ``[N]``)."""
    if before.shape != after.shape:
        raise ValueError(f"visit counts differ in shape: {tuple(before.shape)} and "
                         f"{tuple(after.shape)}")
    return _shared(top_visited(before, top), top_visited(after, top))


def _shared(first: torch.Tensor, second: torch.Tensor) -> float:
    return torch.isin(first, second).double().mean().item()


class Footprint:
    """Counts one rank's input-node visits over an epoch; :meth:`end_epoch` sums them over the
    ranks that train and compares the epoch with the previous one."""

    def __init__(self, num_nodes: int, top: float = TOP) -> None:
        self.counts = torch.zeros(num_nodes, dtype=torch.int64)
        self.top = top
        self.previous_top: torch.Tensor | None = None  # the last epoch's top ids

    def add(self, ids: torch.Tensor) -> None:
        """Count one micro-batch's input nodes (global ids)."""
        self.counts += torch.bincount(ids.cpu().long(), minlength=self.counts.numel())

    def end_epoch(self, group: dist.ProcessGroup | None = None) -> float | None:
        """Similarity with the previous epoch (None after the first); collective on ``group``
        when a process group is up. Resets the counts."""
        counts = self.counts
        if dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1:
            dist.all_reduce(counts, group=group)
        top = top_visited(counts, self.top)
        similarity = None if self.previous_top is None else _shared(self.previous_top, top)
        self.previous_top = top
        self.counts = torch.zeros_like(counts)
        return similarity
