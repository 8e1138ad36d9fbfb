"""Which epoch is reported (best metric / lowest loss / last) and early stopping (Shchur et al.'s
patience, Kipf & Welling's window): the rules on fixed histories, then through the runner,
with a resume stopping where the uninterrupted run did and factored's samplers stopping too."""

import pytest

from gnnscale.runner.run import run
from gnnscale.runner.selection import selected_record, stop_reason
from gnnscale.runner.validate import ConfigError, check_config
from tests._train import TINY, make_cfg


def _history(val_acc, val_loss):
    return [{"epoch": e, "val_acc": a, "test_acc": a / 2, "val_loss": v}
            for e, (a, v) in enumerate(zip(val_acc, val_loss))]


HISTORY = _history([0.5, 0.7, 0.7, 0.6, 0.7], [1.0, 0.8, 0.6, 0.6, 0.9])


@pytest.mark.parametrize("select, epoch", [("metric", 1), ("loss", 3), ("last", 4)])
def test_selected_epoch(select, epoch):
    """metric: first of the best-accuracy ties (PyG); loss: last of the lowest-loss ties
    (Shchur et al. keep the weights on ``val_loss <= best``); last: the final evaluation."""
    assert selected_record(HISTORY, "acc", select)["epoch"] == epoch


def test_selection_skips_unevaluated_epochs():
    history = [{"epoch": 0}, *HISTORY[1:3], {"epoch": 3}]
    assert selected_record(history, "acc", "last")["epoch"] == 2
    assert selected_record([{"epoch": 0}], "acc", "loss") == {}


def _gnnbench_stop(losses, patience):
    """Shchur et al.'s criterion as they wrote it: a counter reset on ``loss <= best``."""
    best, wait = float("inf"), 0
    for i, loss in enumerate(losses):
        if loss <= best:
            best, wait = loss, 0
        else:
            wait += 1
        if wait >= patience:
            return i
    return None


def _kipf_stop(losses, window):
    """Kipf & Welling's loop: after epoch ``e`` (0-based), stop when ``e > window`` and the
    loss is above the mean of the ``window`` before it."""
    for e in range(len(losses)):
        if e > window and losses[e] > sum(losses[e - window:e]) / window:
            return e
    return None


def _first_stop(losses, rule, patience):
    for n in range(1, len(losses) + 1):
        if stop_reason([{"val_loss": v} for v in losses[:n]], rule, patience):
            return n - 1
    return None


LOSSES = [1.0, 0.9, 0.8, 0.8, 0.85, 0.7, 0.72, 0.75, 0.71, 0.73, 0.74, 0.76, 0.7, 0.78, 0.8]


@pytest.mark.parametrize("patience", [1, 2, 3, 4, 6])
def test_patience_rule_is_shchurs_criterion(patience):
    assert _first_stop(LOSSES, "patience", patience) == _gnnbench_stop(LOSSES, patience)


@pytest.mark.parametrize("window", [1, 2, 3, 5])
def test_window_rule_is_kipf_and_wellings_criterion(window):
    assert _first_stop(LOSSES, "window", window) == _kipf_stop(LOSSES, window)


def test_no_rule_never_stops():
    assert stop_reason([{"val_loss": v} for v in LOSSES], "none", 0) is None


@pytest.mark.parametrize("override, match", [
    (["early_stop.rule=patience"], "early_stop.patience >= 1"),
    (["early_stop.rule=window", "early_stop.patience=10", "eval_every=0"], "eval_every >= 1"),
])
def test_early_stop_needs_a_patience_and_evaluations(tmp_path, override, match):
    with pytest.raises(ConfigError, match=match):
        check_config(make_cfg(tmp_path, *TINY, *override))


STOP = ("early_stop.rule=patience", "early_stop.patience=3", "select=loss", "epochs=60")


@pytest.mark.slow
def test_run_stops_early_and_resumes_to_the_same_stop(tmp_path):
    whole = run(make_cfg(tmp_path, *TINY, *STOP, "dist.world_size=1", run="whole"))
    history, summary = whole["history"], whole["summary"]
    stop = summary["stopped_after_epoch"]
    assert stop is not None and len(history) == stop + 1 < 60
    assert stop_reason(history, "patience", 3) and not stop_reason(history[:-1], "patience", 3)
    assert summary["best_epoch"] == selected_record(history, "acc", "loss")["epoch"] == stop - 3
    assert summary["select"] == "loss"
    part = make_cfg(tmp_path, *TINY, *STOP, "dist.world_size=1", "epochs=5", run="part")
    run(part)
    resumed = run(make_cfg(tmp_path, *TINY, *STOP, "dist.world_size=1", "resume=true",
                           run="part"))
    keys = ("epoch", "train_loss", "val_loss", "val_acc", "test_acc")
    figures = lambda h: [[r[k] for k in keys] for r in h]  # noqa: E731
    assert figures(resumed["history"]) == figures(history)  # bit-identical, same stop
    assert resumed["summary"]["stopped_after_epoch"] == stop


@pytest.mark.slow
def test_factored_samplers_stop_with_the_trainers(tmp_path):
    """Sampler ranks keep no history: rank 0's decision reaches them (no hang, no extra epoch)."""
    out = run(make_cfg(tmp_path, *TINY, *STOP, "strategy=factored", "dist.world_size=3"))
    stop = out["summary"]["stopped_after_epoch"]
    assert stop is not None and len(out["history"]) == stop + 1 < 60
