"""strategy=split: one shared sample split over gloo ranks equals one process on that sample."""

import pytest
import torch

from gnnscale.distributed import RankFailed, spawn
from gnnscale.distributed.launch import Topology
from gnnscale.partition.oec import OecPartitioner
from gnnscale.runner.run import run
from tests import _split_fns
from tests._train import TINY, make_cfg

pytestmark = pytest.mark.slow  # multi-rank / subprocess tests: the slow tier

# (model, deps, preaggregate, layer-0 owners shifted away from the partition)
CASES = [
    ("sage", "depcomm", False, False), ("gcn_graph", "depcomm", False, True),
    ("gcn_block", "depcomm", False, False), ("gat", "depcomm", False, True),
    ("sage", "depcomm", True, True), ("sage", "hybrid", False, False),
    ("sage", "hybrid", True, True), ("gat", "hybrid", False, False),
    ("sage_res", "depcomm", False, True), ("gcn_graph_res", "hybrid", False, False),
]


CPU2 = Topology(0, 2, 0, 2, torch.device("cpu"))  # rank 0 of 2, no process group needed


@pytest.mark.parametrize("world", [2, 4])
def test_split_matches_single_process(world):
    """Both input modes (each input row loaded by its owner and shuffled, or read by every rank
    whose block needs it) equal one process on the whole sample."""
    ranks = spawn(_split_fns.split_cases, world, CASES, ("shuffle", "read"))
    for k, (model, deps, preagg, _) in enumerate(CASES):
        ref = _split_fns.reference(model)
        for mode in ("shuffle",) if preagg else ("shuffle", "read"):
            runs = [ranks[r][k][mode] for r in range(world)]
            for r, got in enumerate(runs):
                assert got["loss"] == pytest.approx(ref["loss"], rel=1e-5), (CASES[k], mode, r)
                for a, b in zip(got["grads"], ref["grads"]):
                    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
            if mode == "shuffle":  # every input row is loaded by exactly one rank
                loaded = torch.cat([got["loaded"] for got in runs])
                assert torch.equal(torch.sort(loaded).values, torch.sort(ref["inputs"]).values)
                assert sum(got["requested"] for got in runs) == ref["inputs"].numel()
            else:  # each rank reads its block's sources: every input row, none shuffled
                for got in runs:
                    assert torch.equal(got["read"], got["block_sources"])
                    assert got["requested"] == got["read"].numel()
                read = torch.cat([got["read"] for got in runs]).unique()
                assert torch.equal(read, torch.sort(ref["inputs"]).values)
                # only hidden rows travel: fewer bytes than the shuffle mode's
                assert sum(g["shuffled"] for g in runs) < \
                    sum(ranks[r][k]["shuffle"]["shuffled"] for r in range(world))
            edges = runs[0]["edges"]
            assert runs[0]["total_edges"] == ref["edges"]
            if deps == "depcomm":
                # each layer's vertices are computed by exactly one rank; each edge once
                for i, n_dst in enumerate(ref["sizes"]):
                    got = torch.cat([g["dst"][i] for g in runs])
                    assert torch.equal(torch.sort(got).values,
                                       torch.sort(ref["n_id"][:n_dst]).values), (CASES[k], i)
                assert sum(edges) == ref["edges"]
                assert all(g["replicated"] == 0 for g in runs)
            else:  # the cost model was told to favour replication: it must have replicated
                assert sum(g["replicated"] for g in runs) > 0
                assert sum(edges) > ref["edges"]


def test_partition_book_for_other_world_is_refused():
    from gnnscale.strategies.split.strategy import SplitParallel

    ctx = _split_fns.make_ctx(CPU2, "sage", "depcomm", parts=3)
    with pytest.raises(ValueError, match="one per rank"):
        SplitParallel(ctx).partition_book()


def test_vertex_cut_book_is_refused():
    """split reads a vertex -> part map: a vertex-cut book is refused, naming the edge-cuts."""
    from gnnscale.partition.provider import FixedPartition
    from gnnscale.strategies.split.strategy import SplitParallel

    ctx = _split_fns.make_ctx(CPU2, "sage", "depcomm")
    ctx.partition = FixedPartition(OecPartitioner().partition(ctx.graph, 2), "oec")
    with pytest.raises(ValueError, match="needs an edge-cut: use partitioner=metis"):
        SplitParallel(ctx).partition_book()


@pytest.mark.parametrize("extra, match", [
    (("strategy.inputs=read", "strategy.preaggregate=true"), "inputs=read .*preaggregate"),
    (("strategy.inputs=everywhere",), "strategy.inputs"),
])
def test_inputs_mode_refused_where_it_cannot_hold(tmp_path, tiny_graph, extra, match):
    from gnnscale.runner.validate import check_data

    cfg = make_cfg(tmp_path, *TINY, "strategy=split", "deps=depcomm", *extra)
    with pytest.raises(ValueError, match=match):
        check_data(cfg, tiny_graph)


def test_inputs_read_refused_on_a_partitioned_layout(tmp_path, tiny_graph):
    from gnnscale.errors import ConfigError
    from gnnscale.strategies.config import Checked
    from gnnscale.strategies.split.config import SplitParallelConfig

    cfg = make_cfg(tmp_path, *TINY, "strategy=split", "strategy.inputs=read",
                   f"parts={tmp_path / 'L'}")
    with pytest.raises(ConfigError, match="parts=.*inputs=shuffle"):
        SplitParallelConfig.check_config(cfg, Checked.build(cfg, tiny_graph))


def test_rank_failing_mid_shuffle_ends_the_run():
    with pytest.raises(RankFailed, match="fails mid-shuffle"):
        spawn(_split_fns.fail_mid_shuffle, 2, timeout_s=60.0, grace_s=2.0)


def test_preaggregate_refused_where_not_exact(tmp_path, tiny_graph):
    from gnnscale.runner.validate import check_data

    cfg = make_cfg(tmp_path, *TINY, "strategy=split", "deps=depcomm", "model=gat",
                   "strategy.preaggregate=true")
    with pytest.raises(ValueError, match="preaggregate"):
        check_data(cfg, tiny_graph)


def test_depcache_refused(tmp_path, tiny_graph):
    from gnnscale import registry
    from gnnscale.runner.validate import check_data

    # the cost model by default (it may spare a layer's exchanges); GSplit's depcomm on request
    assert type(registry.build(make_cfg(tmp_path, "strategy=split").deps)).__name__ == "Hybrid"
    cfg = make_cfg(tmp_path, *TINY, "strategy=split", "deps=depcache")
    with pytest.raises(ValueError, match="deps=depcomm or deps=hybrid"):
        check_data(cfg, tiny_graph)


def test_train_split_matches_data_accuracy_band(tmp_path):
    common = (*TINY, "epochs=3", "dist.world_size=2", "checkpoint=false")
    data = run(make_cfg(tmp_path, *common, run="data"))
    # depcomm, inputs shuffled: GSplit's path, where every layer's rows travel
    split = run(make_cfg(tmp_path, *common, "strategy=split", "cache=degree", "cache.ratio=0.2",
                         "cache.placement=partitioned", "deps=depcomm",
                         "strategy.inputs=shuffle", run="split"))
    hist = split["history"][-1]
    for key in ("split_time", "local_edge_ratio", "edge_skew", "bytes_shuffled",
                "edges_computed", "nodes_loaded", "bytes_host_to_rank", "cache_hit_rate"):
        assert key in hist, key
    assert 0.5 < hist["local_edge_ratio"] <= 1.0 and hist["edge_skew"] >= 1.0
    assert hist["cache_hit_rate"] > 0 and hist["bytes_shuffled"] > 0
    assert split["history"][-1]["train_loss"] < split["history"][0]["train_loss"]
    a, b = data["summary"]["final_test_acc"], split["summary"]["final_test_acc"]
    assert abs(a - b) < 0.08, (a, b)


def test_split_gcn_on_cora(tmp_path, shared_datasets):
    raw = str(shared_datasets("planetoid") / "Cora" / "raw")
    cfg = make_cfg(tmp_path, "experiment=cora_gcn", f"dataset.raw_dir={raw}", "strategy=split",
                   "dist.world_size=2", "checkpoint=false")
    res = run(cfg)
    assert res["summary"]["final_test_acc"] >= 0.78, res["summary"]


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_each_rank_receives_exactly_its_own_split(world):
    """Parallel split-samplers: in a round every rank's plan of every step equals its own split
    of that step's sample, and the bytes it receives are exactly the packed parts split for it
    on the other ranks (its split, not the whole sample)."""
    ranks = spawn(_split_fns.round_parts, world)
    for r in ranks:
        assert r["same"] == [True] * world
        assert r["received"] == r["expected"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_parallel_split_samplers_train_bit_for_bit_like_the_leader(tmp_path, world):
    """sample_on=all (step s sampled and split by rank s mod world, each rank receiving only
    its part) gives the leader's splits bit for bit: the same losses and metrics, while each
    rank receives only its own part of each step."""
    common = (*TINY, "strategy=split", "deps=depcomm", "epochs=2", f"dist.world_size={world}",
              "checkpoint=false", "model.dropout=0")
    got = {on: run(make_cfg(tmp_path, *common, f"strategy.sample_on={on}", run=on))
           for on in ("all", "leader")}
    for a, b in zip(got["all"]["history"], got["leader"]["history"]):
        for key in ("train_loss", "val_acc", "edges_computed", "nodes_loaded",
                    "bytes_shuffled", "local_edge_ratio", "edge_skew"):
            assert a[key] == b[key], key
        assert 0 < a["bytes_sample_received"] < b["bytes_sample_received"]
