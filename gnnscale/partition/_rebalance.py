"""Greedy multi-constraint rebalancing: move boundary vertices out of overloaded parts.

Used after METIS, whose multi-constraint balance is a target rather than a guarantee. Each
move takes a vertex of the most overloaded (part, constraint) to the part where it has the
most neighbours among those that stay within every cap, so loads only fall where they exceed
the cap and never rise above it elsewhere.

``relaxed=True`` (METIS on a typed graph, whose per-node-type columns give every vertex weight
in one type column only) changes two rules. A part that is over the cap of a constraint the
moving vertex weighs nothing in still takes it, as the move does not raise that load (else a
part over its cap for one type could receive no vertex of any other type). And when the most
overloaded part can shed nothing within the caps, one of its vertices is pushed to the part it
overloads least (below the worst ratio, which therefore never rises), and that part is drained
next. ``relaxed=False`` keeps the stricter rules (every cap of the target part must hold; give
up when the most overloaded part is stuck), which untyped graphs keep so their books stay what
they were.
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
    num_parts: int, tolerance: float, relaxed: bool = False,
) -> tuple[np.ndarray, bool]:
    """Return ``(part, balanced)``; ``part`` is modified in place.

    For the most overloaded part, vertices that carry more of its overloaded constraints than
    of the others (in units of the per-part mean) move first, best edge-cut gain first, to the
    lightest part with the most neighbours that stays within every cap. ``relaxed``: see the
    module docstring.
    """
    cap = caps(weights, num_parts, tolerance)
    loads = loads_of(part, weights, num_parts)
    norm = weights / np.maximum(weights.sum(0) / num_parts, 1e-12)
    for _ in range((16 if relaxed else 4) * num_parts):
        ratio = loads / cap
        p = int(np.argmax(ratio.max(1)))
        over = ratio[p] > 1.0
        if not over.any():
            return part, True
        members = np.flatnonzero(part == p)
        moved = 0
        for aligned in (True, False):
            moved += _drain(p, members, part, weights, norm, loads, cap, xadj, adjncy,
                            num_parts, aligned, relaxed)
            if not (loads[p] > cap).any():
                break
        if not moved and relaxed:
            moved = _push(p, members, part, weights, loads, cap)
        if not moved:
            return part, False
    return part, bool(np.all(loads <= cap))


def _push(p: int, cand: np.ndarray, part: np.ndarray, weights: np.ndarray, loads: np.ndarray,
          cap: np.ndarray) -> int:
    """``p`` is stuck (every move would push a target over a cap): move the one vertex of ``p``
    carrying its overloaded constraints whose move leaves the lowest load / cap on its target,
    if that stays below ``p``'s own worst ratio (so the worst ratio never rises); the target's
    new overload, if any, is drained next. Returns the count moved (0 or 1)."""
    over = loads[p] > cap
    cand = cand[(weights[cand][:, over] > 0).any(1)]
    if cand.size == 0:
        return 0
    w = weights[cand]  # [m, C]
    after = (loads[None, :, :] + w[:, None, :]) / cap  # [m, P, C]
    after = np.where(w[:, None, :] > 0, after, 0.0).max(2)
    after[:, p] = np.inf
    i, q = np.unravel_index(int(np.argmin(after)), after.shape)
    if not after[i, q] < float((loads[p] / cap).max()):
        return 0
    part[cand[i]] = q
    loads[p] -= w[i]
    loads[q] += w[i]
    return 1


def _drain(p: int, cand: np.ndarray, part: np.ndarray, weights: np.ndarray, norm: np.ndarray,
           loads: np.ndarray, cap: np.ndarray, xadj: np.ndarray, adjncy: np.ndarray,
           num_parts: int, aligned: bool, relaxed: bool = False) -> int:
    """Move vertices of ``cand`` out of part ``p`` until it fits its caps; returns the count.

    ``aligned``: only vertices whose (mean-normalised) weight in the currently overloaded
    constraints exceeds their weight in the others, so relieving one constraint does not drain
    the rest. ``relaxed``: a cap the vertex weighs nothing in does not block a target part."""
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
        fits = loads + w <= cap
        ok = np.all(fits | (w == 0) if relaxed else fits, axis=1)
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
