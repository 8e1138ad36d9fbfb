"""Link-prediction metrics with OGB's evaluator semantics, on complete score vectors (the
caller gathers every rank's scores first, so the figures are exact across ranks).

- :func:`roc_auc`: area under the ROC curve, tied scores counted half (Mann-Whitney U);
- :func:`average_precision`: scikit-learn's ``average_precision_score``: the sum over the
  distinct score thresholds, highest first, of the recall gained times the precision there
  (tied scores form one threshold);
- :func:`hits_at_k`: ``ogbl-collab``/``ddi``/``ppa``: the fraction of positives scored strictly
  above the K-th highest negative of the whole candidate pool (1 when there are fewer than K
  negatives);
- :func:`mrr`: ``ogbl-citation2``: each positive ranked among its own negatives, the rank the
  mean of the optimistic (negatives strictly above) and the pessimistic one (negatives at or
  above), plus one; the mean of the reciprocal ranks.
"""

from __future__ import annotations

import torch

from gnnscale.evaluation.evaluate import roc_auc

__all__ = ["average_precision", "hits_at_k", "mrr", "roc_auc"]


def average_precision(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Average precision of ``scores`` for the binary ``labels`` (NaN without positives)."""
    labels = labels.bool()
    pos = int(labels.sum())
    if pos == 0:
        return float("nan")
    s, order = torch.sort(scores.double(), descending=True, stable=True)
    hit = labels[order].double()
    tp = torch.cumsum(hit, 0)
    fp = torch.cumsum(1.0 - hit, 0)
    last = torch.ones_like(s, dtype=torch.bool)  # the last row of each run of tied scores
    last[:-1] = s[1:] != s[:-1]
    tp, fp = tp[last], fp[last]
    precision = tp / (tp + fp)
    recall = tp / pos
    gained = torch.diff(recall, prepend=recall.new_zeros(1))
    return float((gained * precision).sum())


def hits_at_k(pos: torch.Tensor, neg: torch.Tensor, k: int) -> float:
    """OGB's Hits@K: positives above the K-th highest negative (the pool: all of ``neg``)."""
    if pos.numel() == 0:
        return float("nan")
    if neg.numel() < k:
        return 1.0
    kth = torch.topk(neg.reshape(-1).double(), k).values[-1]
    return float((pos.double() > kth).double().mean())


def mrr(pos: torch.Tensor, neg: torch.Tensor) -> float:
    """OGB's MRR: ``pos`` ``[P]``, each positive's own negatives ``neg`` ``[P, k]``."""
    if pos.numel() == 0:
        return float("nan")
    p = pos.double().reshape(-1, 1)
    n = neg.double().reshape(p.shape[0], -1)
    optimistic = (n > p).sum(1).double()
    pessimistic = (n >= p).sum(1).double()
    rank = 0.5 * (optimistic + pessimistic) + 1
    return float((1.0 / rank).mean())
