"""Greedy multi-constraint rebalancing: move boundary vertices out of overloaded parts.

Used after METIS, whose multi-constraint balance is a target rather than a guarantee. Each
move takes a vertex of the most overloaded (part, constraint) to the part where it has the
most neighbours among those that stay within every cap, so loads only fall where they exceed
the cap and never rise above it elsewhere.
"""

from __future__ import annotations

import numpy as np


def caps(weights: np.ndarray, num_parts: int, tolerance: float) -> np.ndarray:
    """Per-constraint load caps: ``tolerance * mean``, and at least ``mean + 1`` (granularity)."""
    mean = weights.sum(0) / num_parts
    return np.maximum(tolerance * mean, mean + 1.0)


def loads_of(part: np.ndarray, weights: np.ndarray, num_parts: int) -> np.ndarray:
    return np.stack(
        [np.bincount(part, weights=weights[:, c], minlength=num_parts) for c in
         range(weights.shape[1])], 1)


def neighbour_part_counts(
    cand: np.ndarray, part: np.ndarray, xadj: np.ndarray, adjncy: np.ndarray, num_parts: int
) -> np.ndarray:
    """``[len(cand), P]``: how many neighbours of each candidate lie in each part."""
    starts = xadj[cand]
    deg = xadj[cand + 1] - starts
    total = int(deg.sum())
    pos = np.repeat(starts - (np.cumsum(deg) - deg), deg) + np.arange(total)
    rows = np.repeat(np.arange(cand.size), deg)
    flat = np.bincount(rows * num_parts + part[adjncy[pos]], minlength=cand.size * num_parts)
    return flat.reshape(cand.size, num_parts)


def rebalance(
    part: np.ndarray, weights: np.ndarray, xadj: np.ndarray, adjncy: np.ndarray,
    num_parts: int, tolerance: float,
) -> tuple[np.ndarray, bool]:
    """Return ``(part, balanced)``; ``part`` is modified in place.

    For the most overloaded part, vertices that carry more of its overloaded constraints than
    of the others (in units of the per-part mean) move first, best edge-cut gain first, to the
    lightest part with the most neighbours that stays within every cap.
    """
    cap = caps(weights, num_parts, tolerance)
    loads = loads_of(part, weights, num_parts)
    norm = weights / np.maximum(weights.sum(0) / num_parts, 1e-12)
    for _ in range(4 * num_parts):
        ratio = loads / cap
        p = int(np.argmax(ratio.max(1)))
        over = ratio[p] > 1.0
        if not over.any():
            return part, True
        members = np.flatnonzero(part == p)
        moved = 0
        for aligned in (True, False):
            moved += _drain(p, members, part, weights, norm, loads, cap, xadj, adjncy,
                            num_parts, aligned)
            if not (loads[p] > cap).any():
                break
        if not moved:
            return part, False
    return part, bool(np.all(loads <= cap))


def _drain(p: int, cand: np.ndarray, part: np.ndarray, weights: np.ndarray, norm: np.ndarray,
           loads: np.ndarray, cap: np.ndarray, xadj: np.ndarray, adjncy: np.ndarray,
           num_parts: int, aligned: bool) -> int:
    """Move vertices of ``cand`` out of part ``p`` until it fits its caps; returns the count.

    ``aligned``: only vertices whose (mean-normalised) weight in the currently overloaded
    constraints exceeds their weight in the others, so relieving one constraint does not drain
    the rest."""
    cand = cand[part[cand] == p]
    if cand.size == 0:
        return 0
    gain = neighbour_part_counts(cand, part, xadj, adjncy, num_parts).astype(np.float64)
    gain -= gain[:, [p]]
    gain[:, p] = -np.inf
    moved = 0
    for i in np.argsort(-gain.max(1), kind="stable"):
        w = weights[cand[i]]
        over = loads[p] > cap
        if not np.any(w[over] > 0):
            continue
        if aligned and norm[cand[i], over].sum() <= norm[cand[i], ~over].sum():
            continue
        ok = np.all(loads + w <= cap, axis=1)
        ok[p] = False
        if not ok.any():
            continue
        score = gain[i] - 1e-3 * (loads / cap).max(1)  # ties go to the lightest part
        q = int(np.argmax(np.where(ok, score, -np.inf)))
        part[cand[i]] = q
        loads[p] -= w
        loads[q] += w
        moved += 1
        if not (loads[p] > cap).any():
            break
    return moved
