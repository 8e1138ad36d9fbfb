"""The ``auto`` suite's pure parts (benchmarks.auto): round rotation, per-run figures by auto's
rules, medians over rounds, and the pick-over-fastest ratios and target check."""

from __future__ import annotations

import math

import pytest

from benchmarks.auto import SETTINGS, over_rounds, pick_ratios, rotation, run, run_figures
from gnnscale.strategies.auto.choice import seconds_per_loss


def test_rotation_puts_every_candidate_in_every_position():
    names = ["data", "split", "factored"]
    order = rotation(names, 4)
    assert order == [names, ["split", "factored", "data"], ["factored", "data", "split"], names]
    for r in order:
        assert sorted(r) == sorted(names)
    assert [r[0] for r in order[:3]] == names  # each leads one round
    assert rotation([], 2) == [[], []]


def test_run_figures_follow_autos_rules():
    hist = [{"epoch_time": 9.0, "train_loss": 2.0}, {"epoch_time": 1.0, "train_loss": 1.5},
            {"epoch_time": 3.0, "train_loss": 1.2}, {"epoch_time": 2.0, "train_loss": 1.0}]
    fig = run_figures(hist, loss0=2.2)
    assert fig["epoch_time"] == 2.0  # median of the epochs after the warm-up
    assert fig["loss_drop_per_epoch"] == pytest.approx((2.2 - 1.0) / 4)
    assert fig["seconds_per_loss"] == pytest.approx(seconds_per_loss(2.0, 0.3))
    assert run_figures(hist[:1], loss0=1.0)["seconds_per_loss"] == math.inf  # loss went up


def test_over_rounds_takes_medians_and_the_spread():
    runs = [{"epoch_time": t, "loss_drop_per_epoch": 0.5, "seconds_per_loss": t / 0.5,
             "final_test_acc": a} for t, a in ((1.0, 0.8), (3.0, None), (2.0, 0.9))]
    out = over_rounds(runs)
    assert out["epoch_time"] == 2.0 and out["seconds_per_loss"] == 4.0
    assert out["epoch_time_rounds"] == [1.0, 3.0, 2.0]
    assert out["epoch_time_spread"] == pytest.approx(1.0)
    assert out["final_test_acc"] == pytest.approx(0.85)  # missing accuracies are left out
    assert over_rounds(runs[:1])["epoch_time_spread"] == 0.0


def test_pick_ratios_compare_the_pick_with_the_best_separate_run():
    sep = {"data": {"seconds_per_loss": 1.0, "epoch_time": 0.5},
           "split": {"seconds_per_loss": 1.08, "epoch_time": 0.4},
           "fullgraph": {"seconds_per_loss": 5.0, "epoch_time": 0.1}}
    r = pick_ratios("split", sep)
    assert r["fastest_by_score"] == "data" and r["fastest_by_epoch_time"] == "fullgraph"
    assert r["pick_over_fastest"] == pytest.approx(1.08) and r["within_10_percent"]
    assert r["pick_over_fastest_epoch_time"] == pytest.approx(4.0)
    assert not pick_ratios("fullgraph", sep)["within_10_percent"]
    assert pick_ratios("data", sep)["pick_over_fastest"] == 1.0
    sep["data"]["seconds_per_loss"] = math.inf  # a candidate that did not learn
    assert pick_ratios("split", sep)["pick_over_fastest"] == 1.0


def test_quoted_scales_give_several_mini_batch_steps():
    from gnnscale.data.synthetic import resolve

    for quick, settings in SETTINGS.items():
        for preset, (scale, batch) in settings.items():
            p = resolve(preset, scale)
            train = p.num_nodes * p.train_ratio
            assert math.ceil(train / batch) >= 4, (quick, preset, train, batch)


def test_unknown_preset_is_refused():
    with pytest.raises(SystemExit, match="reddit_like"):
        run(quick=True, presets=("reddit_like",))
