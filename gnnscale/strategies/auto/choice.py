"""The choice rule of ``strategy=auto``: seconds of epoch time per unit of training-loss
decrease, the rematch of close leaders, and the decision table."""

from __future__ import annotations

import math
import statistics
from typing import Any

from gnnscale.errors import ConfigError


def seconds_per_loss(epoch_time: float, loss_drop_per_epoch: float) -> float:
    """Time to accuracy per epoch: seconds per unit of training-loss decrease (inf when the
    loss did not decrease)."""
    return epoch_time / loss_drop_per_epoch if loss_drop_per_epoch > 0 else math.inf


def choose(rows: list[dict[str, Any]], criterion: str = "measured", task: str | None = None
           ) -> tuple[str, str]:
    """The candidate with the fewest seconds per unit of training-loss decrease, and why
    (naming ``task``, the task whose training loss it is, when given).

    A row that ran has ``epoch_time`` (median measured, warm-up epoch skipped),
    ``projected_epoch_time`` (criterion=modelled) and ``loss_drop_per_epoch`` =
    (initial loss - loss of the last profiled epoch) / profiled epochs; the initial loss is
    the candidate's own (the same seed and initial parameters for every candidate, under the
    model options its strategy settles: GCN normalised by the graph's degrees or each
    block's). Its score is
    time / loss_drop_per_epoch, with the measured or the projected time.
    """
    key = "epoch_time" if criterion == "measured" else "projected_epoch_time"
    scored = sorted((seconds_per_loss(r[key], r["loss_drop_per_epoch"]), r["name"], r)
                    for r in rows if r.get("status") == "ran")
    scored = [s for s in scored if math.isfinite(s[0])]
    if not scored:
        raise ConfigError("strategy=auto: no candidate ran and decreased the training loss; "
                          "see the decision table (auto.json) for each one's reason")
    best, name, row = scored[0]
    whose = f" for task={task}" if task else ""
    why = (f"{name}{whose}: {best:.3g} s per unit of training-loss decrease ({criterion} "
           f"{row[key]:.3g} s/epoch, loss -{row['loss_drop_per_epoch']:.3g}/epoch)")
    if len(scored) > 1:
        nxt, nxt_name, _ = scored[1]
        why += f", {nxt / best:.2f}x less than the runner-up {nxt_name} ({nxt:.3g})"
    return name, why


def spread(row: dict[str, Any]) -> float:
    """(max - min) / median of a profile's timed epochs (the warm-up epoch of each profile
    run left out): how far one candidate's own epoch time moves on this host."""
    times = row.get("timed_epochs") or row.get("epoch_times", [])[1:]
    if len(times) < 2:
        return 0.0
    return (max(times) - min(times)) / statistics.median(times)


def close_leaders(rows: list[dict[str, Any]], within: float) -> tuple[str, str, str] | None:
    """The two best-scored candidates (measured) and why they need a rematch, when the
    runner-up's score is within ``within`` of the best or within either one's own
    :func:`spread`; None when the lead is clear (or fewer than two ran)."""
    scored = sorted((r["seconds_per_loss"], r["name"], r) for r in rows
                    if r.get("status") == "ran" and math.isfinite(r.get("seconds_per_loss",
                                                                          math.inf)))
    if len(scored) < 2:
        return None
    (best, a, ra), (nxt, b, rb) = scored[:2]
    gap, noise = nxt / best - 1.0, max(spread(ra), spread(rb))
    if gap > max(within, noise):
        return None
    return a, b, (f"{b}'s score is {gap:.1%} above {a}'s, within max(rematch_within "
                  f"{within:.0%}, their epoch-time spread {noise:.0%})")


def pooled(first: dict[str, Any], more: list[dict[str, Any]]) -> dict[str, Any]:
    """One candidate's row over its first profile and its rematch profiles: the median of
    every timed epoch (each run's warm-up left out) and the median loss drop per epoch."""
    runs = [first, *more]
    timed = [t for r in runs for t in (r["epoch_times"][1:] or r["epoch_times"])]
    row = dict(first)
    row.update(timed_epochs=timed, epoch_time=statistics.median(timed),
               loss_drop_per_epoch=statistics.median(r["loss_drop_per_epoch"] for r in runs),
               profile_runs=[{"epoch_time": r["epoch_time"],
                              "loss_drop_per_epoch": r["loss_drop_per_epoch"],
                              "run_dir": r.get("run_dir")} for r in runs])
    row["seconds_per_loss"] = seconds_per_loss(row["epoch_time"], row["loss_drop_per_epoch"])
    return row


def over_budget(spent: float, best_run_s: float | None, budget: dict[str, Any]) -> str | None:
    """Why no further candidate may start after ``spent`` seconds of profiling (None: it may):
    ``budget["profile_s"]`` seconds when set, else ``share / (1 - share)`` of ``best_run_s``
    (the best-scored candidate's projected training so far), so that profiling takes at most
    ``share`` of the whole run."""
    if budget.get("profile_s") is not None:
        cap, what = float(budget["profile_s"]), f"strategy.profile_s={budget['profile_s']:g}"
    elif budget.get("share") is not None and best_run_s is not None:
        share = float(budget["share"])
        cap = share / (1.0 - share) * best_run_s
        what = (f"strategy.profile_share={share:g} of a run whose best candidate so far "
                f"projects {best_run_s:.1f} s of training")
    else:
        return None
    if spent < cap:
        return None
    return f"the profiling budget is spent ({spent:.1f} s of {cap:.1f} s: {what})"


def table(rows: list[dict], chosen: str) -> str:
    """The decision table, one line per candidate (``steps``: a profiled epoch's steps of a
    whole epoch's; ``s/epoch``, ``drop/ep``: per profiled epoch)."""
    lines = [f"{'candidate':<10} {'status':<8} {'deps':<9} {'cache':<9} {'steps':>7} "
             f"{'s/epoch':>8} {'loss first->last':>17} {'drop/ep':>8} {'s/loss':>8}"]
    for r in rows:
        if r["status"] != "ran":
            lines.append(f"{r['name']:<10} {r['status']:<8} {r.get('deps', ''):<9} "
                         f"{r.get('cache', ''):<9} {r['reason'][:90]}")
            continue
        loss = f"{r['losses'][0]:.3f}->{r['losses'][-1]:.3f}"
        proj = (f"  projected {r['projected_epoch_time']:.3g} s/epoch"
                if "projected_epoch_time" in r else "")
        mark = "  <- chosen" if r["name"] == chosen else ""
        steps = (f"{r['window_steps']}/{r['steps_per_epoch']}" if "window_steps" in r
                 else "all")
        lines.append(f"{r['name']:<10} {'ran':<8} {r['deps']:<9} {r['cache']:<9} {steps:>7} "
                     f"{r['epoch_time']:>8.3f} {loss:>17} {r['loss_drop_per_epoch']:>8.3f} "
                     f"{r['seconds_per_loss']:>8.3g}{proj}{mark}")
    return "\n".join(lines)
