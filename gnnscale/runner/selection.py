"""Which epoch a run reports, and when it stops early: the published protocols, as options.

- ``select=metric``: the first epoch with the best validation metric (PyG's examples).
- ``select=loss``: the last epoch with the lowest validation loss (Shchur et al.'s
  ``gnnbench`` criterion restores the weights of that epoch: ``val_loss <= best``).
- ``select=last``: the last evaluated epoch (Kipf & Welling test the model they stop with).

``early_stop.rule``, counted in evaluations (one per epoch with ``eval_every=1``):

- ``patience``: stop once the validation loss has not improved for ``patience`` evaluations
  (Shchur et al., patience 50);
- ``window``: stop once the validation loss is above the mean of the ``patience`` before it
  (Kipf & Welling, window 10).

Both read only the metrics history, so a resumed run stops where the uninterrupted one did.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from gnnscale.distributed.device import comm_device
from gnnscale.schema import Select, StopRule


def reported(metric: str, history: list[dict]) -> list[str]:
    """The names under which ``history`` reports the task metric ``metric``: itself
    (``val_<metric>``), or its variants ``<metric>@K`` in the order reported (link
    prediction's ``hits@K`` of each ``task.hits_k``); none when it was not evaluated."""
    if any(f"val_{metric}" in h for h in history):
        return [metric]
    return list(dict.fromkeys(k.removeprefix("val_") for h in history for k in h
                              if k.startswith(f"val_{metric}@")))


def selection_metric(choice: str, history: list[dict], auto: tuple[str, ...]) -> str:
    """The metric reported first: ``choice`` (its first variant ``<choice>@K`` when the
    evaluation reports variants: Hits@K), or for ``auto`` the first of the task's ``auto``
    preference (``TaskConfig.auto_metric``) the evaluation reported, else its last (node
    classification: ROC-AUC when reported, for binary tasks where accuracy says little on
    unbalanced classes, else accuracy; link prediction: ``auc``)."""
    choice = getattr(choice, "value", choice)
    if choice != "auto":
        return (reported(choice, history) or [choice])[0]
    return next((m for m in auto if reported(m, history) == [m]), auto[-1])


def selected_record(history: list[dict], metric: str, select: str) -> dict:
    """The evaluated record ``select`` picks (``{}`` when nothing was evaluated)."""
    evaluated = [h for h in history if f"val_{metric}" in h]
    if not evaluated:
        return {}
    if select == Select.metric:
        return max(evaluated, key=lambda h: h[f"val_{metric}"])  # first of the ties
    if select == Select.loss:
        return min(reversed(evaluated), key=lambda h: h["val_loss"])  # last of the ties
    if select == Select.last:
        return evaluated[-1]
    raise ValueError(f"select must be one of {[s.value for s in Select]}, got {select!r}")


def stop_reason(history: list[dict], rule: str, patience: int) -> str | None:
    """Why the run stops after ``history`` under ``rule`` (None: it goes on)."""
    if rule == StopRule.none:
        return None
    losses = [h["val_loss"] for h in history if "val_loss" in h]
    if rule == StopRule.patience:
        best = len(losses) - 1 - losses[::-1].index(min(losses)) if losses else 0
        since = len(losses) - 1 - best
        if losses and since >= patience:
            return (f"validation loss has not improved for {since} evaluations "
                    f"(best {losses[best]:.4f})")
        return None
    if rule == StopRule.window:
        if len(losses) > patience + 1:
            mean = sum(losses[-patience - 1:-1]) / patience
            if losses[-1] > mean:
                return (f"validation loss {losses[-1]:.4f} is above the mean of the "
                        f"{patience} evaluations before it ({mean:.4f})")
        return None
    raise ValueError(f"early_stop.rule must be one of {[r.value for r in StopRule]}, "
                     f"got {rule!r}")


def agree(stop: bool, enabled: bool) -> bool:
    """Rank 0's decision on every rank of the world (ranks that do not report, such as
    ``factored``'s samplers, have no history): one broadcast per epoch when ``enabled``."""
    if not enabled or not dist.is_initialized() or dist.get_world_size() == 1:
        return stop
    flag = torch.tensor([int(stop)], device=comm_device())
    dist.broadcast(flag, src=0)
    return bool(flag.item())
