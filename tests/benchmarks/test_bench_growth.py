"""Suite ``growth``: its figure tells a run whose epochs grow from one a busy host slows."""

from __future__ import annotations

import pytest

from benchmarks.growth import _overrides, decile_ratio, settings


def test_growing_epochs_stand_out_and_a_busy_host_does_not():
    flat = [0.5] + [1.0 + (3.0 if i % 7 == 0 else 0.0) for i in range(200)]  # spikes: load
    grows = [0.5] + [1.0 + i / 10 for i in range(200)]
    assert decile_ratio(flat)["min_last_over_first"] == pytest.approx(1.0)
    assert decile_ratio(grows)["min_last_over_first"] > 10
    assert decile_ratio(grows)["first_min_s"] == 1.0  # the warm-up epoch is left out


def test_every_strategy_is_measured_with_an_evaluation_after_each_epoch():
    cfg = settings(quick=False)
    assert cfg["strategies"] == ["data", "split", "factored", "fullgraph", "offload"]
    assert cfg["epochs"] == 200 and cfg["eval_every"] == 1
    for s in cfg["strategies"]:
        assert f"strategy={s}" in _overrides(cfg, s) and "eval_every=1" in _overrides(cfg, s)
