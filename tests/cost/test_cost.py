"""The cost model: profiles load and validate; projection arithmetic on known volumes."""

from __future__ import annotations

import pytest

from gnnscale.cost import (
    HardwareProfile,
    ProfileError,
    ProjectionError,
    Volumes,
    all_profiles,
    load_profile,
    project,
)
from gnnscale.cost.profile import validate
from gnnscale.cost.volumes import layer_widths, split_layers, volumes_of_run

BASE = {"name": "toy", "device": "gpu", "nodes": 1, "devices_per_node": 4,
        "compute_flops": 1e12, "memory_Bps": 1e11, "memory_bytes": 1e10,
        "host_to_device_Bps": 1e10, "sample_edges_per_s": 1e8, "peer_Bps": 1e11}


def test_shipped_profiles_load():
    profiles = all_profiles()
    assert {"gsplit_nvlink", "gsplit_pcie", "gnnlab_8gpu", "neutronstar_ecs16",
            "hongtu_4xa100", "deepgalois_stampede2"} <= set(profiles)
    assert profiles["neutronstar_ecs16"].devices == 16
    assert profiles["neutronstar_ecs16"].network_Bps == pytest.approx(0.75e9)
    assert profiles["hongtu_4xa100"].peer_Bps == pytest.approx(200e9)
    assert profiles["deepgalois_stampede2"].device == "cpu"


@pytest.mark.parametrize("change, match", [
    ({"compute_flops": -1}, "compute_flops"), ({"typo_Bps": 1.0}, "typo_Bps"),
    ({"device": "tpu"}, "device"), ({"nodes": 2}, "network_Bps"), ({"nodes": 0}, "nodes"),
])
def test_bad_profiles_refused(change, match):
    with pytest.raises(ProfileError, match=match):
        validate({**BASE, **change}, "toy.yaml")
    raw = dict(BASE)
    del raw["memory_Bps"]
    with pytest.raises(ProfileError, match="memory_Bps"):
        validate(raw, "toy.yaml")
    with pytest.raises(ProfileError, match="no hardware profile"):
        load_profile("no_such_machine")


def test_projection_arithmetic_single_node():
    hw = validate(BASE, "toy")
    # 2 ranks, one layer: 1e6 edges of width 10 and 1e4 updates 10 -> 5, one linear map
    v = Volumes(ranks=2, layers=[(1e6, 1e4, 10, 5)], bytes_host_to_rank=2e9,
                bytes_rank_to_rank=4e9, bytes_allreduce=2e6, sampled_edges=2e8)
    p = project(v, hw)
    assert p.modelled
    agg = 3 * 4 * 1e6 * 10 / 1e11  # bytes over memory bandwidth
    upd = 3 * 2 * 1e4 * 10 * 5 / 1e12
    assert p.compute == pytest.approx((agg + upd) / 2)
    assert p.host_to_rank == pytest.approx(1e9 / 1e10)
    assert p.rank_to_rank == pytest.approx(2e9 / 1e11)  # NVLink, no peer on another node
    assert p.network == 0.0
    assert p.allreduce == pytest.approx(2 * (1 / 2) * 1e6 / 1e11)  # ring over the peer link
    assert p.sample == pytest.approx(2e8 / 1e8 / 2)
    assert p.total == pytest.approx(p.sample + p.host_to_rank + p.compute + p.rank_to_rank
                                    + p.allreduce)


def test_projection_over_nodes_and_dedicated_samplers():
    hw = HardwareProfile(**{**BASE, "nodes": 4, "devices_per_node": 1, "network_Bps": 1e9,
                            "peer_Bps": None})
    v = Volumes(ranks=4, layers=[(0.0, 0.0, 1, 1)], bytes_rank_to_rank=4e9)
    p = project(v, hw)
    assert p.rank_to_rank == 0.0 and p.network == pytest.approx(1e9 / 1e9)  # every peer remote
    with pytest.raises(ProjectionError, match="devices"):
        project(Volumes(ranks=5, layers=[]), hw)
    # one sampler rank beside one trainer: the stages overlap, the longer one counts
    s = project(Volumes(ranks=2, layers=[], sampled_edges=1e8, sampler_ranks=1,
                        bytes_host_to_rank=1e10), validate(BASE, "toy"))
    assert s.sample == pytest.approx(1.0) and s.host_to_rank == pytest.approx(1.0)
    assert s.total == pytest.approx(1.0)


def test_layers_from_epoch_totals():
    widths = layer_widths(100, 64, 47, 3)
    assert widths == [(100, 64), (64, 64), (64, 47)]
    full = split_layers(300.0, 30.0, widths, None)
    assert [(e, u) for e, u, _, _ in full] == [(100.0, 10.0)] * 3
    # fanouts [2, 3] (hop 1 first): output layer ~ B*2 edges, input layer ~ B*2*3
    sampled = split_layers(80.0, None, layer_widths(8, 4, 2, 2), [2, 3])
    assert [e for e, _, _, _ in sampled] == [60.0, 20.0]
    assert [u for _, u, _, _ in sampled] == [20.0, 10.0]


def test_paper_ratios_from_the_suites_json():
    from gnnscale.cost.papers import ROOT, gsplit, neutronstar

    results = ROOT / "docs" / "results"
    rows = neutronstar(results) + gsplit(results)
    assert rows, "docs/results holds the fullgraph and split suites' JSON"
    for r in rows:
        assert r["projected_ratio (modelled)"] > 0 and r["published_ratio"]
        assert r["needs_explanation"] == (r["gap_factor"] > 1.5)


def _run(strategy: str, history: list[dict], task: dict | None = None):
    from gnnscale.compare.runs import Run

    cfg = {"model": {"_target_": "gnnscale.models.sage.SAGE", "hidden": 4, "num_layers": 2},
           "sampler": {"fanouts": [5, 5]},
           "strategy": {"_target_": f"gnnscale.strategies.{strategy}.X"}}
    if task is not None:
        cfg["task"] = task
    return Run(path=None, config=cfg, history=history, summary={"world_size": 2},
               graph={"num_nodes": 30, "num_edges": 200, "num_features": 8, "num_classes": 2})


def test_offload_volumes_are_a_full_graph_epoch():
    # offload reports no vertex_updates: still a full-graph epoch (every vertex once a layer),
    # nothing sampled, whatever sampler the config carries
    v = volumes_of_run(_run("offload", [{"epoch_time": 1.0, "edges_computed": 600.0}]))
    assert v.sampled_edges == 0.0
    assert v.layers == [(300.0, 30.0, 8, 4), (300.0, 30.0, 4, 2)]
    sampled = volumes_of_run(_run("data", [{"epoch_time": 1.0, "edges_computed": 600.0}]))
    assert sampled.sampled_edges == 600.0  # a sampling strategy stays sampled


def test_link_volumes_use_the_embedding_width():
    task = {"_target_": "gnnscale.tasks.link.LinkTask", "dim": 16}
    v = volumes_of_run(_run("fullgraph", [{"epoch_time": 1.0, "edges_computed": 400.0,
                                           "vertex_updates": 60.0}], task))
    assert v.layers == [(200.0, 30.0, 8, 4), (200.0, 30.0, 4, 16)]  # not num_classes=2
    node = volumes_of_run(_run("fullgraph", [{"epoch_time": 1.0, "edges_computed": 400.0,
                                              "vertex_updates": 60.0}],
                               {"_target_": "gnnscale.tasks.node.NodeTask"}))
    assert node.layers[-1][3] == 2


def test_dependency_probe_prices_edges_quietly_either_way():
    """The deps cost probe times a CSR product (a sum/mean model) or a gather-scatter
    (``sparse=False``); either way positive figures and no warning reaches the user (torch
    warns about sparse CSR tensors on every construction); configured costs are kept."""
    import math
    import warnings

    from gnnscale.deps.costs import probe_costs
    from gnnscale.deps.hybrid import Hybrid

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for sparse in (True, False):
            c = probe_costs(dim=16, rows=256, edges=2048, sparse=sparse)
            assert all(math.isfinite(v) and v > 0 for v in (c.t_vertex, c.t_edge))
            assert c.t_comm == 0.0 and c.t_sync == 0.0  # one process: nothing exchanged
    given = {"t_vertex": 1.0, "t_edge": 2.0, "t_comm": 3.0}
    assert Hybrid(costs=given).prepare(sparse=False).t_edge == 2.0
