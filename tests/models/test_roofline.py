"""The roofline suite's counting: an epoch's FLOPs and bytes from its volumes, the bound on a
machine profile, the phase that overruns, and the machine measurements (benchmarks/roofline)."""

import math

import pytest

import benchmarks
from benchmarks import roofline as R
from gnnscale.compare.runs import Run
from gnnscale.cost import HardwareProfile, Volumes

# A known tiny epoch: 2 ranks, SAGE (2 linear maps), layer 0: 100 edges, 10 updates, 8 -> 4;
# layer 1: 50 edges, 5 updates, 4 -> 2.
TINY = Volumes(ranks=2, layers=[(100.0, 10.0, 8, 4), (50.0, 5.0, 4, 2)], linear_maps=2,
               bytes_host_to_rank=1000.0, bytes_rank_to_rank=200.0, bytes_allreduce=50.0,
               sampled_edges=150.0)
ROUND = HardwareProfile(name="round", device="cpu", nodes=1, devices_per_node=2,
                        compute_flops=1e3, memory_Bps=1e3, memory_bytes=1e9,
                        host_to_device_Bps=1e2, peer_Bps=1e2, sample_edges_per_s=10.0)


def test_flops_and_bytes_of_a_known_tiny_epoch():
    c = R.counts(TINY)
    # linear maps: 2 FLOPs per multiply-add, forward + 2 backward, 2 maps
    assert c["flops_linear"] == 3 * 2 * 2 * (10 * 8 * 4 + 5 * 4 * 2) == 4320
    # aggregation: one add per row element, 3 row passes, at the layer's input width
    assert c["flops_aggregation"] == 3 * (100 * 8 + 50 * 4) == 3000
    assert c["flops"] == 7320
    assert c["bytes_aggregation"] == 3 * 4 * (100 * 8 + 50 * 4) == 12000
    assert c["bytes"] == 12000 + 1000 + 200 + 50


def test_bound_of_the_tiny_epoch_on_a_round_machine():
    b = R.bound(TINY, ROUND)
    s = b["stages"]
    assert s["compute"] == pytest.approx((12000 / 1e3 + 4320 / 1e3) / 2)  # per trainer
    assert s["host_to_rank"] == pytest.approx(1000 / 2 / 1e2)
    assert s["rank_to_rank"] == pytest.approx(200 / 2 / 1e2)
    assert s["allreduce"] == pytest.approx(2 * (2 - 1) / 2 * (50 / 2) / 1e2)  # ring
    assert s["sample"] == pytest.approx(150 / 10 / 2)
    assert b["bound_s"] == pytest.approx(8.16 + 5 + 1 + 0.25 + 7.5)
    assert b["bound_overlapped_s"] == pytest.approx(8.16)


def test_a_row_states_its_ratio_and_where_the_time_goes():
    history = [{"epoch_time": 99.0},  # warm-up, left out
               {"epoch_time": 40.0, "sample_time": 7.5, "load_time": 5.0, "compute_time": 26.0,
                "comm_time": 1.25},
               {"epoch_time": 44.0, "sample_time": 7.5, "load_time": 5.0, "compute_time": 30.0,
                "comm_time": 1.25}]
    r = R.row(history, TINY, ROUND)
    assert r["epoch_s"] == 42.0 and r["ratio"] == pytest.approx(42.0 / 21.91)
    assert not r["within_target"]
    assert r["where"].startswith("compute_time 19.8s over its bound")
    fast = R.row([{"epoch_time": 22.0, "compute_time": 8.2, "sample_time": 7.5,
                   "load_time": 5.0, "comm_time": 1.3}], TINY, ROUND)
    assert fast["within_target"] and fast["ratio"] == pytest.approx(22.0 / 21.91)


def test_offload_counts_as_a_full_graph_epoch():
    model = {"_target_": "gnnscale.models.sage.SAGE", "hidden": 4, "num_layers": 2}
    run = Run(path=None, config={"model": model, "sampler": {"fanouts": [5, 5]},
                                 "strategy": {"_target_": "gnnscale.strategies.offload.Offload"}},
              history=[{"epoch_time": 1.0, "edges_computed": 600.0}],
              summary={"world_size": 2},
              graph={"num_nodes": 30, "num_features": 8, "num_classes": 2})
    v, dec = R.epoch_volumes(run)
    assert v.sampled_edges == 0.0 and dec == 0.0
    assert v.layers == [(300.0, 30.0, 8, 4), (300.0, 30.0, 4, 2)]


def test_a_link_epoch_counts_its_decoder_and_the_embedding_width():
    model = {"_target_": "gnnscale.models.sage.SAGE", "hidden": 4, "num_layers": 2}
    run = Run(path=None, config={"model": model, "sampler": {"fanouts": [5, 5]},
                                 "task": {"_target_": "gnnscale.tasks.link.LinkTask", "dim": 16,
                                          "num_negatives": 3},
                                 "strategy": {"_target_": "gnnscale.strategies.fullgraph."
                                              "FullGraph"}},
              history=[{"epoch_time": 1.0, "edges_computed": 400.0, "vertex_updates": 60.0}],
              summary={"world_size": 2},
              graph={"num_nodes": 30, "num_edges": 200, "num_features": 8, "num_classes": 2})
    v, dec = R.epoch_volumes(run)
    assert v.layers == [(200.0, 30.0, 8, 4), (200.0, 30.0, 4, 16)]  # out width: task.dim
    pairs = 200 / 2 * (1 + 3)  # positives: half the message edges; 3 negatives each
    assert dec == 3 * 4 * 2 * pairs * 16
    b = R.bound(v, ROUND, dec)
    assert b["stages"]["decoder"] == pytest.approx(dec / 1e3 / 2)
    assert b["bound_s"] == pytest.approx(R.bound(v, ROUND)["bound_s"] + dec / 1e3 / 2)
    assert R.counts(v, dec)["bytes"] == R.counts(v)["bytes"] + dec


def test_the_machine_rates_are_measured_and_fill_a_profile():
    m = R.measure_machine(R.gemm_shapes(64, [(16, 8)]), width=16, megabytes=1, repeats=2)
    for key in ("gemm_flops", "stream_Bps", "gather_Bps", "index_per_s"):
        assert math.isfinite(m[key]) and m[key] > 0
    assert set(m["gemm_flops_by_shape"]) == {"64x16x8", "16x64x8"}
    hw = R.profile_of(m, 2)
    assert hw.compute_flops == m["gemm_flops"] and hw.peer_Bps == m["stream_Bps"]
    assert hw.memory_Bps == hw.host_to_device_Bps == m["gather_Bps"]
    better = R.best_of(m, {**m, "gather_Bps": 2 * m["gather_Bps"]})
    assert better["gather_Bps"] == 2 * m["gather_Bps"]


def test_the_suite_is_registered_and_covers_every_strategy_and_task():
    assert "roofline" in benchmarks.suites()
    assert {s for s, _ in R.STRATEGIES} == {"data", "split", "factored", "fullgraph", "offload"}
    assert {d for s, d in R.STRATEGIES if s == "fullgraph"} == {"depcache", "depcomm", "hybrid"}
    assert R.TASKS == ("node", "link")
    ov = R.overrides(R.settings(True), "fullgraph", "hybrid", "link")
    assert "deps=hybrid" in ov and "task=link" in ov and "dist.world_size=2" in ov


def test_the_roofline_figure_is_drawn_from_a_report(tmp_path):
    from scripts import plots

    rows = {key: {**R.row([{"epoch_time": t, "compute_time": t / 2, "sample_time": 1.0}],
                          TINY, ROUND), "graph": {}}
            for key, t in (("node/data", 30.0), ("link/fullgraph/hybrid", 90.0))}
    rep = {"config": {"ranks": 2, "threads": 1},
           "results": {"rows": rows, "load_average_before": [3.0, 2.0, 1.0]}}
    plots.roofline(rep, tmp_path)
    assert (tmp_path / "roofline.png").stat().st_size > 1000
