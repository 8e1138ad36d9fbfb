"""Footprint similarity (FGNN Table 2): how alike two consecutive epochs' samples are.

FGNN (section 6) defines the similarity of epoch ``i`` to epoch ``j`` as
``sum_{v in T_i & T_j} min(f_i(v), f_j(v)) / sum_{v in T_j} f_j(v)``, where ``f`` counts how
often a vertex is an input node of a micro-batch and ``T`` is the set of the 10% most visited
vertices. High similarity is what makes a static, pre-sampled cache (PreSC) work. One
implementation serves the run metric (``footprint=true``, any sampling strategy) and the
``factored`` benchmark.

Ties: when the top ``k`` cuts through vertices with equal counts (on a small graph often most
of them), which of them are in ``T`` is arbitrary. Picking them by id would pick the same ones
every epoch and inflate the similarity, so each tied vertex is in ``T`` with probability
``slots left / tied vertices`` and the numerator is its expectation over independent choices
in the two epochs (the denominator does not depend on the choice: tied vertices have equal
counts).
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from gnnscale.distributed.collectives import all_reduce_host

TOP = 0.1  # FGNN's definition: the 10% most visited vertices


def top_membership(counts: torch.Tensor, top: float = TOP) -> torch.Tensor:
    """Float64 ``[N]``: the chance that each vertex is among the ``top`` share (at least one)
    most visited: 1 above the cut, ``slots left / tied`` at it, 0 below; sums to ``k``."""
    if not 0.0 < top <= 1.0:
        raise ValueError(f"top must lie in (0, 1], got {top}")
    k = max(1, math.ceil(top * counts.numel() - 1e-9))
    cut = torch.topk(counts, k).values[-1]
    above = counts > cut
    tied = counts == cut
    member = above.to(torch.float64)
    member[tied] = (k - int(above.sum())) / int(tied.sum())
    return member


def footprint_similarity(before: torch.Tensor, after: torch.Tensor, top: float = TOP) -> float:
    """FGNN's similarity of epoch ``before`` to epoch ``after`` (visit counts ``[N]``)."""
    if before.shape != after.shape:
        raise ValueError(f"visit counts differ in shape: {tuple(before.shape)} and "
                         f"{tuple(after.shape)}")
    first = top_membership(before, top)
    ids = first.nonzero().flatten()
    return _similarity(ids, first[ids], before[ids], after, top)


def _similarity(ids: torch.Tensor, chance: torch.Tensor, counts_before: torch.Tensor,
                after: torch.Tensor, top: float) -> float:
    """The expected similarity, from the earlier epoch's possible top vertices ``ids`` (their
    chances of being in ``T`` and their counts) and the later epoch's counts."""
    member = top_membership(after, top)
    after_f = after.to(torch.float64)
    shared = chance * member[ids] * torch.minimum(counts_before.to(torch.float64), after_f[ids])
    total = float((member * after_f).sum())
    return float(shared.sum()) / total if total else 0.0


class Footprint:
    """Counts one rank's input-node visits over an epoch; :meth:`end_epoch` sums them over the
    ranks that train and compares the epoch with the previous one."""

    def __init__(self, num_nodes: int, top: float = TOP) -> None:
        self.counts = torch.zeros(num_nodes, dtype=torch.int64)
        self.top = top
        # the last epoch's possible top vertices: ids, chances, counts
        self.previous: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    def add(self, ids: torch.Tensor) -> None:
        """Count one micro-batch's input nodes (global ids)."""
        ids = ids.cpu().long()  # O(batch) per step, not O(vertices) as a bincount would be
        self.counts.index_add_(0, ids, torch.ones_like(ids))

    def end_epoch(self, group: dist.ProcessGroup | None = None) -> float | None:
        """Similarity with the previous epoch (None after the first); collective on ``group``
        when a process group is up. Resets the counts."""
        counts = self.counts
        if dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1:
            all_reduce_host(counts, group=group)
        similarity = None if self.previous is None else _similarity(*self.previous, counts,
                                                                     self.top)
        member = top_membership(counts, self.top)
        ids = member.nonzero().flatten()
        self.previous = (ids, member[ids], counts[ids])
        self.counts = torch.zeros_like(counts)
        return similarity
