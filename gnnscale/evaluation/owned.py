"""Metrics from a partitioned forward: each rank scores the vertices it is master of, and the
figures equal the layer-wise evaluation's (used by the full-graph strategies)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.distributed import ProcessGroup

from gnnscale.data.graph import GraphStore
from gnnscale.evaluation.evaluate import split_metrics


def present_splits(g: GraphStore, splits: tuple[str, ...]) -> list[str]:
    """The splits of ``splits`` the graph has vertices in."""
    return [s for s in splits if getattr(g, f"{s}_idx") is not None
            and getattr(g, f"{s}_idx").numel()]


def owned_metrics(logits: torch.Tensor, masters: torch.Tensor, g: GraphStore,
                  present: list[str], group: ProcessGroup | None) -> dict[str, float]:
    """``<split>_acc``, ``_loss``, ``_macro_f1``, ``_micro_f1`` (and ``_rocauc`` for two
    classes) from this rank's logits of its
    masters (each vertex is one rank's master), over the ranks of ``group`` (collective),
    as the layer-wise evaluation computes them."""
    idx = [getattr(g, f"{s}_idx") for s in present]
    where = torch.full((g.num_nodes,), -1, dtype=torch.long)  # position in the split concat
    where[torch.cat(idx)] = torch.arange(sum(i.numel() for i in idx))
    pos = where[masters]
    mine = (pos >= 0).nonzero().reshape(-1)
    return split_metrics(logits[mine.to(logits.device)], g.labels()[masters[mine]], pos[mine],
                         [i.numel() for i in idx], present, group)


@torch.no_grad()
def evaluate_owned(model: torch.nn.Module, forward: Callable[[], torch.Tensor],
                   masters: torch.Tensor, g: GraphStore, splits: tuple[str, ...],
                   group: ProcessGroup | None) -> dict[str, float]:
    """Run ``forward`` (the strategy's partitioned forward, returning this rank's logits of
    ``masters``) in eval mode and score the owned vertices of ``splits`` (collective)."""
    present = present_splits(g, splits)
    if not present:
        return {}
    was = model.training
    model.eval()
    try:
        logits = forward()
    finally:
        model.train(was)
    return owned_metrics(logits, masters, g, present, group)
