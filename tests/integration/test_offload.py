"""strategy=offload (HongTu) on real gloo ranks against one process on the whole graph and
against fullgraph + depcomm; its transfer counts, its device bound and its refusals."""

from __future__ import annotations

import itertools

import pytest
import torch

from gnnscale import registry
from gnnscale.distributed import RankFailed, spawn
from gnnscale.partition.metis import MetisPartitioner
from gnnscale.partition.random import RandomPartitioner
from gnnscale.runner.validate import ConfigError, check_data
from gnnscale.strategies.offload.chunks import load_set, split_part, two_level
from tests import _fullgraph_fns as F
from tests import _offload_fns as O
from tests._train import make_cfg

DEDUPS = ("none", "inter", "inter+intra")


def _cases(models=("sage", "gcn", "gat"), chunk_counts=(1, 3)) -> list[tuple[str, dict]]:
    out = []
    for model, chunks, dedup, reorg, inter in itertools.product(
            models, chunk_counts, DEDUPS, (False, True), ("cache", "recompute")):
        if model == "gat" and inter == "cache":
            continue
        out.append((model, dict(chunks=chunks, dedup=dedup, reorganize=reorg,
                                intermediate=inter)))
    return out


def _close(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.allclose(x, y, atol=1e-5, rtol=1e-4) for x, y in zip(a, b, strict=True))


def test_one_rank_equals_the_reference():
    for model in ("sage", "gcn", "gin", "gat", "gcn_res"):
        ref = F.reference(model)
        for opts in (dict(chunks=4, intermediate="recompute"), dict(chunks=2),
                     dict(chunks=3, level2="metis")):
            m = O.one_epoch(O.make_strategy(None, None, model, **opts))
            assert m["train_loss"] == pytest.approx(ref["loss"], rel=1e-5), (model, opts)
            assert _close(m["grads"], ref["grads"]), (model, opts)
            assert m["rows_host_loaded"] == m["planned_rows"]
            assert 0 < m["peak_device_bytes"] <= m["device_bound_bytes"]


@pytest.mark.slow
@pytest.mark.parametrize("world,partitioner,chunk_counts", [(2, "metis", (1, 3)),
                                                           (4, "random", (3,))])
def test_every_combination_matches_single_process_and_depcomm(world, partitioner,
                                                              chunk_counts):
    """Every combination on 2 ranks; on 4 ranks every one with 3 chunks per part (one chunk
    per part, no intra reuse, is covered on 2 ranks: the suite stays under 15 minutes)."""
    graph = F.make_graph()
    parter = MetisPartitioner() if partitioner == "metis" else RandomPartitioner(seed=1)
    part = parter.partition(graph, world).part
    cases = _cases(chunk_counts=chunk_counts) + [
        # the rule's own choice, and per-batch mixes of both modes as the rule may set them
        ("gcn", dict(chunks=3, dedup="inter+intra", reorganize=True, intermediate="auto")),
        ("sage", dict(chunks=3, dedup="inter+intra", reorganize=False, intermediate="auto",
                      modes=("crc", "rcr", "rrc"))),
        ("gcn", dict(chunks=3, dedup="inter", reorganize=True, intermediate="auto",
                     modes=("ccr", "rcc", "crr"))),
        ("gin", dict(chunks=3, dedup="inter+intra", reorganize=True, intermediate="auto",
                     modes=("rcc", "crr", "rcr"))),
        # METIS chunks inside each part
        ("sage", dict(chunks=3, dedup="inter+intra", reorganize=True, intermediate="cache",
                      level2="metis")),
        ("gat", dict(chunks=3, dedup="inter", reorganize=False, intermediate="recompute",
                     level2="metis")),
        ("sage_res", dict(chunks=3, dedup="inter+intra", reorganize=True, intermediate="auto")),
        ("gcn_res", dict(chunks=1, dedup="inter", reorganize=False, intermediate="recompute",
                         level2="metis"))]
    ranks = spawn(O.offload_cases, world, part, cases, timeout_s=400.0)
    models = tuple(sorted({c[0] for c in cases}))
    refs = {m: F.reference(m) for m in models}
    comm = spawn(O.depcomm_grads, world, part, models, timeout_s=120.0)[0]
    for i, (model, opts) in enumerate(cases):
        mine = [r[i] for r in ranks]
        for m in mine:  # the loss and gradients are summed over ranks
            assert m["train_loss"] == pytest.approx(refs[model]["loss"], rel=1e-5), (model, opts)
            assert _close(m["grads"], refs[model]["grads"]), (model, opts)
            assert _close(m["grads"], comm[model]["grads"]), (model, opts)
            assert m["rows_host_loaded"] == m["planned_rows"], (model, opts)
            assert m["peak_device_bytes"] <= m["device_bound_bytes"], (model, opts)
            assert m["bytes_rank_to_rank"] > 0
            assert m["modes"] == mine[0]["modes"], (model, opts)  # one choice on every rank
    # dedup: fewer host rows at each level, per batch the counts the definitions give
    by = {(c[0], c[1]["chunks"], c[1]["dedup"], c[1]["reorganize"], c[1]["intermediate"]):
          sum(r[i]["per_pass_rows"] for r in ranks) for i, c in enumerate(cases)
          if "level2" not in c[1] and c[1]["intermediate"] != "auto"}
    for chunks, reorg in itertools.product(chunk_counts, (False, True)):
        none, inter, both = (by[("sage", chunks, d, reorg, "cache")] for d in DEDUPS)
        ch = two_level(graph, part, world, chunks, reorg)
        assert none == sum(x.numel() for p in ch.load for x in p)  # alpha |V|
        assert inter == sum(torch.unique(torch.cat([ch.load[p][ch.batch(p, s)]
                                                    for p in range(world)])).numel()
                            for s in range(chunks))
        assert none > inter >= both
        if chunks == 1:
            assert inter == both  # one batch: nothing to reuse


@pytest.mark.parametrize("model", ["sage", "gcn", "gin"])
def test_mixed_modes_equal_the_reference(model):
    """Per batch and layer either mode, as the rule may choose: a recomputed batch after a
    cached one reloads its whole buffer (nothing to reuse), and the loads match the plan."""
    ref = F.reference(model)
    for modes in (("crc", "rcr", "rrc"), ("rrc", "ccr", "rcr")):
        strat = O.make_strategy(None, None, model, chunks=3, intermediate="auto", modes=modes)
        m = O.one_epoch(strat)
        assert m["train_loss"] == pytest.approx(ref["loss"], rel=1e-5), modes
        assert _close(m["grads"], ref["grads"]), modes
        assert m["rows_host_loaded"] == m["planned_rows"], modes
        for k, p in enumerate(modes):
            assert m[f"chunks_cached_l{k}"] == p.count("c")
            assert m[f"chunks_recomputed_l{k}"] == p.count("r")
        assert 0 < m["peak_device_bytes"] <= m["device_bound_bytes"]


def test_auto_decides_every_batch_in_the_first_epoch_and_reports_it():
    """intermediate=auto: the first epoch's forward measures, then every layer of a model
    that can cache gets one mode per batch, reported per layer in the metrics; GAT (and
    residual models) recompute without measuring."""
    strat = O.make_strategy(None, None, "gcn", chunks=3, intermediate="auto")
    assert all(m is None for m in strat.modes)
    m = O.one_epoch(strat)
    assert all(len(x) == 3 and set(x) <= {"cache", "recompute"} for x in strat.modes)
    assert sorted(strat.rule_report) == [0, 1, 2]
    for k, rep in strat.rule_report.items():
        assert rep["cached"] + rep["recomputed"] == 3
        assert m[f"chunks_cached_l{k}"] == rep["cached"]
        assert rep["modelled_s"] <= min(rep["modelled_all_cache_s"],
                                        rep["modelled_all_recompute_s"]) + 1e-12
    assert strat.rule_rates.h2d > 0 and strat.rule_rates.d2h > 0
    assert "layer 2: cache" in strat.describe_rule()
    m2 = strat.train_epoch(1)  # decided once: the second epoch keeps the modes
    assert [m2[f"chunks_cached_l{k}"] for k in range(3)] == \
        [m[f"chunks_cached_l{k}"] for k in range(3)]
    gat = O.make_strategy(None, None, "gat", chunks=3, intermediate="auto")
    assert gat.modes == [["recompute"] * 3] * 3
    O.one_epoch(gat)
    assert gat.rule_report == {}


def test_rule_takes_the_cheapest_sequence_of_modes():
    """The dynamic programme equals trying every sequence (a recomputed batch costs less after
    a recomputed one: it reuses that buffer); ties go to caching."""
    from gnnscale.strategies.offload import rule

    gen = torch.Generator().manual_seed(0)
    for n in range(1, 7):
        for _ in range(30):
            costs = torch.rand(n, 3, generator=gen, dtype=torch.float64)
            costs[:, 2] = costs[:, 1] + torch.rand(n, generator=gen, dtype=torch.float64)
            got = rule.decide(costs)
            best = min(rule.modelled(costs, list(p)) for p in itertools.product(
                (rule.CACHE, rule.RECOMPUTE), repeat=n))
            assert rule.modelled(costs, got) == pytest.approx(best)
    # reuse makes a run of recomputes pay off where each batch alone would cache
    costs = torch.tensor([[1.0, 1.5, 1.5], [1.0, 0.2, 1.5], [1.0, 0.2, 1.5]],
                         dtype=torch.float64)
    assert rule.decide(costs) == [rule.RECOMPUTE] * 3
    assert rule.decide(torch.ones(2, 3, dtype=torch.float64)) == [rule.CACHE] * 2


def test_rule_costs_are_rows_over_the_measured_rates():
    from gnnscale.strategies.offload import rule

    strat = O.make_strategy(None, None, "sage", chunks=3, intermediate="auto")
    t = strat.transfers[1]
    rates = rule.Rates(h2d=100.0, d2h=50.0, r2r=25.0, reuse=1000.0)
    cache, again, cold = rule.batch_costs(t, 8, 0.5, rates)
    dst = t.dst.numel() * 32
    assert cache == pytest.approx(dst / 50.0 + 2 * dst / 100.0)
    assert again == pytest.approx(t.rows_loaded * 32 / 100.0 + t.rows_reused * 32 / 1000.0 + 0.5)
    assert cold == pytest.approx((t.rows_loaded + t.rows_reused) * 32 / 100.0 + 0.5)


def test_device_tier_measures_the_storages_alive():
    """Each storage counted once and whole while some tensor keeps it alive, whether or not
    the tier still names it; freed tensors drop out; sparse matrices count their arrays."""
    from gnnscale.strategies.offload.tiers import DeviceTier, TransferStats

    tier = DeviceTier(torch.device("cpu"), TransferStats())
    a = tier.hold("a", torch.zeros(100, 4))
    view = a[10:20]
    tier.hold("b", torch.zeros(50, 4))
    assert tier.live_bytes() == 150 * 16 and tier.peak == 150 * 16
    tier.release("a")
    assert tier.live_bytes() == 150 * 16  # ``a`` and its view are still referenced here
    del a
    assert tier.live_bytes() == 150 * 16  # the view keeps the whole storage
    del view
    assert tier.live_bytes() == 50 * 16
    tier.release("b")
    assert tier.live_bytes() == 0 and tier.peak == 150 * 16
    csr = torch.eye(4).to_sparse_csr()
    parts = (csr.crow_indices(), csr.col_indices(), csr.values())
    assert tier.measure(csr) == sum(x.untyped_storage().nbytes() for x in parts) >= 88
    tier.reset_peak()
    assert tier.peak == tier.live_bytes() > 0
    del csr, parts
    loaded = tier.load(torch.ones(10, 3), torch.tensor([1, 2]))
    assert tier.live_bytes() == loaded.untyped_storage().nbytes()
    assert tier.stats.host_to_device == 24 and tier.stats.h2d_seconds > 0


def test_tracked_tensors_do_not_accumulate_over_epochs_and_evaluations():
    """The tier's record of device tensors holds each live tensor once: a tensor tracked on
    every batch (a block's index, a parameter autograd saves) does not add an entry per
    batch, so a measurement's work, and the epoch, do not grow with the epochs run (it grew
    by ~70 entries per epoch and evaluation, and each measurement walked them all)."""
    strat = O.make_strategy(None, None, "gcn", chunks=3)
    tier = strat.tier
    tier.track(strat.blocks[0].edge_index, strat.blocks[0].edge_index)
    assert sum(t is strat.blocks[0].edge_index for t in tier.alive()) == 1
    counts = []
    for epoch in range(4):
        m = strat.train_epoch(epoch)
        strat.evaluate(1024)
        counts.append(len(tier.alive()))
        assert 0 < m["peak_device_bytes"] <= m["device_bound_bytes"]
    assert counts[1:] == counts[:1] * 3, counts


@pytest.mark.parametrize("model", ["sage", "gcn", "gin", "gcn_res"])
def test_chunk_products_equal_the_models_own_bit_for_bit(model):
    """A chunk's cached matrices give the model's aggregate, autograd's gradient of it and
    :meth:`aggregate_grad` exactly (the same sums in the same order)."""
    from gnnscale.strategies.offload.compute import ChunkProducts

    strat = O.make_strategy(None, None, model, chunks=3)
    net, block = strat.module, strat.blocks[1]
    torch.manual_seed(0)
    for k in range(strat.num_layers):
        prod = ChunkProducts.build(net, k, block)
        width = net.in_proj.out_features if net.residual and k == 0 else strat.dims[k]
        x = torch.randn(block.num_src, width, requires_grad=True)
        grad = torch.randn(block.num_dst, x.shape[1])
        ref = net.aggregate(k, x, block)
        (gx_ref,) = torch.autograd.grad(ref, x, grad)
        got = prod.aggregate(net, k, x)
        (gx,) = torch.autograd.grad(got, x, grad)
        assert torch.equal(got, ref) and torch.equal(gx, gx_ref)
        if net.linear_aggregate:
            assert torch.equal(prod.aggregate_grad(net, grad), net.aggregate_grad(k, grad, block))


def test_chunk_matrices_are_built_once_and_shared_by_layers(monkeypatch):
    """After the first epoch no pass builds a sparse matrix again (torch's CSR backward and the
    model's own product built one, and sorted its transpose, per chunk and pass); layers with
    the same edge weights share one pair; the device bound counts the pair, and the measured
    peak stays within the bound in every epoch."""
    import gnnscale.models.base as base
    import gnnscale.strategies.offload.compute as compute

    built = []

    def counting(real):
        def csr(*a, **k):
            built.append(1)
            return real(*a, **k)
        return csr

    monkeypatch.setattr(base, "csr_matrix", counting(base.csr_matrix))
    monkeypatch.setattr(compute, "csr_matrix", counting(getattr(compute, "csr_matrix", None)),
                        raising=False)
    for model, modes in (("gcn", ("ccc", "rrr", "crc")), ("sage", None), ("gat", None)):
        strat = O.make_strategy(None, None, model, chunks=3, dedup="none", modes=modes)
        strat.train_epoch(0)
        strat.evaluate(1024)
        built.clear()
        for epoch in (1, 2, 3):
            m = strat.train_epoch(epoch)
            strat.evaluate(1024)
            assert 0 < m["peak_device_bytes"] <= m["device_bound_bytes"], (model, epoch)
        assert built == [], model
        if model == "gcn":  # the graph's degrees: every layer the same weights, one pair
            assert len({id(p) for p in strat._products.values()}) == len(strat.transfers)


def test_chunks_balance_in_edges_and_cover_the_part():
    graph = F.make_graph()
    masters = torch.arange(graph.num_nodes)
    cs = split_part(graph, masters, 4)
    assert torch.equal(torch.cat(cs), masters)
    edges = [int((graph.indptr[c + 1] - graph.indptr[c]).sum()) for c in cs]
    assert max(edges) <= 1.5 * sum(edges) / 4
    s = load_set(graph, cs[0])
    assert torch.equal(s[: cs[0].numel()], cs[0])
    with pytest.raises(ValueError, match="strategy.chunks=200 is more than"):
        split_part(graph, masters[:100], 200)


def test_metis_level2_covers_the_part_balances_edges_and_follows_locality():
    """On a graph whose ids carry no locality, METIS chunks read far fewer rows than id ranges
    (alpha), cover the part once, and stay balanced by in-edges."""
    from gnnscale.data.synthetic import generate
    from gnnscale.strategies.offload.chunks import metis_part

    graph = generate("products_sim", scale=0.004, seed=0)
    part = RandomPartitioner(seed=1).partition(graph, 2).part
    masters = (part == 1).nonzero().flatten()
    cs = metis_part(graph, masters, 4)
    assert len(cs) == 4 and all(c.numel() > 0 for c in cs)
    assert all(bool((c[1:] > c[:-1]).all()) for c in cs)  # sorted ids
    assert torch.equal(torch.sort(torch.cat(cs)).values, masters)
    edges = [int((graph.indptr[c + 1] - graph.indptr[c] + 1).sum()) for c in cs]
    assert max(edges) <= 1.1 * sum(edges) / 4
    by_range = two_level(graph, part, 2, 4, level2="range").replication(graph.num_nodes)
    by_metis = two_level(graph, part, 2, 4, level2="metis").replication(graph.num_nodes)
    assert by_metis < 0.6 * by_range
    whole = metis_part(graph, torch.arange(graph.num_nodes), 3)  # one part: no subgraph
    assert torch.equal(torch.sort(torch.cat(whole)).values, torch.arange(graph.num_nodes))
    with pytest.raises(ValueError, match="strategy.level2 must be one of"):
        two_level(graph, part, 2, 4, level2="bfs")


def test_reorganisation_shares_more_neighbours():
    graph = F.make_graph(n=400, e=900)
    part = RandomPartitioner(seed=3).partition(graph, 4).part
    plain = two_level(graph, part, 4, 8, reorganize=False)
    reorg = two_level(graph, part, 4, 8, reorganize=True)

    def transition(ch):
        return sum(torch.unique(torch.cat([ch.load[p][ch.batch(p, s)] for p in range(4)])).numel()
                   for s in range(8))
    assert transition(reorg) < transition(plain)
    for p in range(4):  # every part still runs each chunk once
        assert sorted(reorg.assign[p]) == list(range(8))


def test_too_small_budget_names_the_smallest_workable_one():
    one = O.make_strategy(None, None, "sage", chunks=1).bound
    four = O.make_strategy(None, None, "sage", chunks=4).bound
    assert four < one
    budget = (four + 1) / 1e9
    with pytest.raises(ConfigError, match=r"at least .* or use strategy.chunks=(2|4) "):
        O.make_strategy(None, None, "sage", chunks=1, device_budget_gb=budget)
    assert O.make_strategy(None, None, "sage", chunks=4, device_budget_gb=budget).bound == four
    with pytest.raises(ConfigError, match="no chunk count fits"):
        O.make_strategy(None, None, "sage", chunks=2, device_budget_gb=1e-6)


FULL = ("dataset=synthetic", "dataset.preset=tiny", "model.hidden=16", "model.num_layers=2",
        "strategy=offload", "logger=none", "epochs=2")


def _check(tmp_path, *overrides: str) -> None:
    cfg = make_cfg(tmp_path, *FULL, *overrides)
    check_data(cfg, registry.build(cfg.dataset).load())


@pytest.mark.parametrize("overrides,match", [
    (("partitioner=cvc",), "needs an edge-cut"),
    (("strategy.chunks=100000",), "strategy.chunks=100000 is more than"),
    (("strategy.chunks=0",), "strategy.chunks must be >= 1"),
    (("strategy.level2=bfs",), "strategy.level2 must be one of"),
    (("strategy.dedup=all",), "strategy.dedup must be one of"),
    (("model=gat", "strategy.intermediate=cache"), "intermediate=recompute"),
    (("model=gcn", "model.gcn_norm=block"), "model.gcn_norm=graph"),  # set by hand
    (("model.norm=batch",), "model.norm=layer or none"),
    (("strategy.device_budget_gb=0",), "device_budget_gb must be > 0"),
    (("strategy.device_budget_gb=1e-7",), r"smaller than the working set.* at least"),
])
def test_refused_before_training(tmp_path, overrides, match):
    with pytest.raises(ConfigError, match=match):
        _check(tmp_path, "dist.world_size=2", *overrides)


@pytest.mark.slow
def test_runner_offload_matches_fullgraph(tmp_path):
    from gnnscale.runner.run import run

    gcn = ("model=gcn", "model.gcn_norm=graph")
    one = run(make_cfg(tmp_path, *FULL[:-2], "strategy=fullgraph", "logger=none", "epochs=2",
                       *gcn, "dist.world_size=1", run="one"))
    off = run(make_cfg(tmp_path, *FULL, *gcn, "dist.world_size=2", "strategy.chunks=4",
                       "strategy.dedup=inter+intra", "strategy.reorganize=true", run="off"))
    a = [h["train_loss"] for h in one["history"]]
    b = [h["train_loss"] for h in off["history"]]
    assert b == pytest.approx(a, rel=1e-4)
    assert off["summary"]["final_test_acc"] == pytest.approx(one["summary"]["final_test_acc"],
                                                            abs=2e-3)
    last = off["history"][-1]
    for key in ("bytes_host_to_device", "bytes_device_to_host", "bytes_rank_to_rank",
                "bytes_reused", "replication_alpha", "peak_device_bytes",
                "device_bound_bytes", "recompute_time", "plan_time"):
        assert key in last, key
    assert last["peak_device_bytes"] <= last["device_bound_bytes"]


def test_too_small_budget_is_refused_at_launch_with_the_smallest_that_works(tmp_path):
    """The launcher plans every rank and names the budget that fits all of them: just above
    it passes, just below it is refused."""
    from gnnscale import registry
    from gnnscale.strategies.base import Checked
    from gnnscale.strategies.offload.strategy import Offload

    graph = registry.build(make_cfg(tmp_path, *FULL).dataset).load()

    def check(budget: float) -> None:
        cfg = make_cfg(tmp_path, *FULL, "dist.world_size=2", "strategy.chunks=2",
                       f"strategy.device_budget_gb={budget}")
        Offload.check(cfg, Checked.build(cfg, graph))

    with pytest.raises(ConfigError, match="at least") as err:
        check(1e-7)
    need = float(str(err.value).split("at least ")[1].split(",")[0])
    check(need * 1.001)
    with pytest.raises(ConfigError, match="at least"):
        check(need * 0.99)


def test_the_launchers_bound_is_the_ranks_under_task_link(tmp_path):
    """The launcher's planned bound (the budget it names) is the one the ranks plan: the
    model's output width is the task's (task=link: the embedding, task.dim), not the
    dataset's class count."""
    from gnnscale.distributed.topology import Topology
    from gnnscale.runner.validate import validate
    from gnnscale.runner.worker import build_context

    over = (*FULL, "task=link", "task.dim=256", "dist.world_size=2", "strategy.chunks=2")
    with pytest.raises(ConfigError, match="at least") as err:
        validate(make_cfg(tmp_path, *over, "strategy.device_budget_gb=1e-7"))
    need = float(str(err.value).split("at least ")[1].split(",")[0])
    cfg = make_cfg(tmp_path, *over)
    bounds = []
    for rank in range(2):
        topo = Topology(rank, 2, rank, 2, torch.device("cpu"))
        strat = registry.build(cfg.strategy, ctx=build_context(topo, cfg))
        strat.plan()
        assert strat.dims[-1] == 256
        bounds.append(strat.bound)
    assert need == pytest.approx(max(bounds) / 1e9, rel=1e-3)


@pytest.mark.slow
def test_a_budget_error_on_the_ranks_reaches_the_launcher():
    with pytest.raises(RankFailed, match="device_budget_gb"):
        spawn(O.offload_cases, 2, torch.arange(120) % 2,
              [("sage", dict(chunks=2, device_budget_gb=1e-7))], timeout_s=60.0)
