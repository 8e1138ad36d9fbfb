"""strategy=factored: sampler ranks feed trainer ranks; with no staleness a step equals data."""

import pytest
import torch

from gnnscale.distributed import RankFailed, spawn
from gnnscale.distributed.launch import Topology
from gnnscale.errors import ConfigError
from gnnscale.runner.run import run
from gnnscale.sampling.base import Block, MiniBatch
from gnnscale.strategies.base import Checked
from gnnscale.strategies.factored.allocation import allocate, parse_samplers
from gnnscale.strategies.factored.queue import body_size, pack, unpack
from gnnscale.strategies.factored.strategy import Factored
from tests import _factored_fns
from tests._train import TINY, make_cfg

CPU1 = Topology(0, 1, 0, 1, torch.device("cpu"))


def _assert_matches(trainer: dict, ref: dict, t: int) -> None:
    assert len(trainer["losses"]) == len(ref["losses"]) == 3
    for step, loss in enumerate(trainer["losses"]):
        assert loss == pytest.approx(ref["losses"][step][t], rel=1e-5)
        for got, want in zip(trainer["grads"][step], ref["grads"][step]):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
    for got, want in zip(trainer["params"], ref["params"]):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


def _jobs(ranks: list[dict], trainer: bool) -> list:
    return sorted(j for r in ranks if r["trainer"] == trainer for j in r["jobs"])


@pytest.mark.slow
@pytest.mark.parametrize("samplers,trainers", [(1, 1), (1, 2), (2, 1)])
def test_factored_matches_single_process_and_data(samplers, trainers):
    ranks = spawn(_factored_fns.train_one_epoch, samplers + trainers, "factored", str(samplers))
    ref = _factored_fns.reference_epoch(trainers)
    assert [r["trainer"] for r in ranks] == [True] * trainers + [False] * samplers
    for t in range(trainers):
        _assert_matches(ranks[t], ref, t)
    every_job = sorted((0, s, t) for s in range(3) for t in range(trainers))
    assert _jobs(ranks, trainer=False) == every_job  # each sampled exactly once
    assert _jobs(ranks, trainer=True) == every_job  # each trained exactly once
    lead = ranks[0]["metrics"]
    assert lead["samplers"] == samplers and lead["trainers"] == trainers
    assert lead["samples_produced"] == len(every_job)
    assert sum(r["metrics"]["samples_consumed"] for r in ranks[:trainers]) == len(every_job)
    received = sum(r["metrics"]["bytes_queue_received"] for r in ranks[:trainers])
    assert lead["queue_bytes"] == received > 0
    for sampler in ranks[trainers:]:  # the queue bound (queue_depth=1) held
        assert sampler["metrics"]["queue_peak_jobs"] == 1
    if trainers == 2:  # parameters equal strategy=data with as many ranks as trainers
        data = spawn(_factored_fns.train_one_epoch, trainers, "data")
        for got, want in zip(ranks[0]["params"], data[0]["params"]):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_factored_matches_data_with_random_walk_blocks():
    """The queue carries the random-walk blocks' edge weights: 1 sampler + 1 trainer equal one
    process, and strategy=data, step by step."""
    # train_one_epoch(topo, kind, samplers, queue_depth, switching, staleness, epochs, sampler)
    ranks = spawn(_factored_fns.train_one_epoch, 2, "factored", "1", 1, False, 0, 1,
                  "random_walk")
    ref = _factored_fns.reference_epoch(1, "random_walk")
    _assert_matches(ranks[0], ref, 0)
    data = _factored_fns.train_one_epoch(CPU1, "data", sampler="random_walk")
    _assert_matches(data, ref, 0)
    assert ranks[0]["metrics"]["samples_consumed"] == 3


def test_one_rank_samples_the_epoch_then_trains():
    out = _factored_fns.train_one_epoch(CPU1, "factored", "auto")
    _assert_matches(out, _factored_fns.reference_epoch(1), 0)
    assert out["jobs"] == [(0, s, 0) for s in range(3)]
    assert out["metrics"]["samplers"] == 0 and out["metrics"]["samples_produced"] == 3


@pytest.mark.parametrize("world,t_s,t_t,want", [
    (4, 1.0, 1.0, 2),  # K = 1: half the ranks sample
    (4, 1.0, 3.0, 1),  # K = 3: one sampler feeds three trainers
    (4, 3.0, 1.0, 3),  # K = 1/3: ceil(4 / (4/3)) = 3
    (4, 10.0, 0.1, 3),  # sampling dominates: clamped to N - 1, one trainer stays
    (8, 1.0, 100.0, 1),  # training dominates: at least one sampler
    (6, 2.0, 3.0, 3),  # K = 1.5: ceil(6 / 2.5) = 3
    (1, 1.0, 1.0, 0),  # one rank: no sampler
])
def test_allocation_rule(world, t_s, t_t, want):
    assert allocate(world, t_s, t_t) == want


def test_bad_sampler_counts_fail_clearly():
    assert parse_samplers("auto", 4) is None and parse_samplers("2", 4) == 2
    with pytest.raises(ConfigError, match="between 1 and 3"):
        parse_samplers("4", 4)  # zero trainers
    with pytest.raises(ConfigError, match="between 1 and 3"):
        parse_samplers("0", 4)
    with pytest.raises(ConfigError, match="'auto' or a count"):
        parse_samplers("many", 4)
    with pytest.raises(ConfigError, match="world_size=1"):
        parse_samplers("1", 1)


def test_check_refuses_before_ranks_start(tmp_path, tiny_graph):
    cfg = make_cfg(tmp_path, *TINY, "strategy=factored", "dist.world_size=2",
                   "strategy.samplers=2")
    with pytest.raises(ConfigError, match="strategy.samplers=2"):
        Factored.check(cfg, Checked.build(cfg, tiny_graph))
    cfg = make_cfg(tmp_path, *TINY, "strategy=factored", "dist.world_size=3",
                   "cache=degree", "cache.placement=partitioned")
    with pytest.raises(ConfigError, match="cache.placement=replicated"):
        Factored.check(cfg, Checked.build(cfg, tiny_graph))
    ok = make_cfg(tmp_path, *TINY, "strategy=factored", "dist.world_size=3")
    Factored.check(ok, Checked.build(ok, tiny_graph))


def test_queue_wire_format_round_trips():
    n_id = torch.tensor([5, 2, 9, 7, 1])
    weights = torch.tensor([3.0, 1.0, 0.1])  # visit counts, and a value no int64 would keep
    blocks = [Block(torch.tensor([[2, 3, 4], [0, 1, 1]]), (5, 2), n_id, weights),
              Block(torch.tensor([[1], [0]]), (2, 1), torch.tensor([8, 6])),
              Block(torch.tensor([[0], [0]]), (1, 1))]
    header, body = pack(MiniBatch(n_id, blocks, 1), 4, 7)
    epoch, step, mb = unpack(header, body)
    assert (epoch, step, mb.num_targets) == (4, 7, 1)
    assert torch.equal(mb.n_id, n_id)
    for got, want in zip(mb.blocks, blocks):
        assert got.size == want.size and torch.equal(got.edge_index, want.edge_index)
        assert (got.src_ids is None) == (want.src_ids is None)
        if want.src_ids is not None:
            assert torch.equal(got.src_ids, want.src_ids)
        assert (got.edge_weight is None) == (want.edge_weight is None)
        if want.edge_weight is not None:
            assert got.edge_weight.dtype == torch.float32
            assert torch.equal(got.edge_weight, want.edge_weight)
    assert body.numel() == body_size(header)


@pytest.mark.slow
@pytest.mark.parametrize("switching", [False, True])
def test_dead_sampler_ends_the_run(switching):
    with pytest.raises(RankFailed, match="sampler died mid-epoch"):
        spawn(_factored_fns.sampler_dies, 2, switching, timeout_s=60.0, grace_s=2.0)


@pytest.mark.slow
def test_train_factored_auto_through_the_runner(tmp_path):
    """train.py's path: auto allocation, metrics, evaluation and checkpoints on the trainers."""
    out = run(make_cfg(tmp_path, *TINY, "strategy=factored", "dist.world_size=3", "epochs=2",
                       "cache=degree", "cache.ratio=0.2"))
    first, last = out["history"]
    assert last["samplers"] + last["trainers"] == 3 and last["samplers"] >= 1
    assert last["measured_k"] > 0
    assert last["samples_produced"] == last["samples_consumed"] > 0
    assert last["queue_bytes"] == last["bytes_queue_received"] > 0
    assert last["sampler_busy_time"] > 0 and last["cache_hit_rate"] > 0
    per_trainer = last["cache_hit_rate_per_rank"]  # each trainer's own hit rate
    assert len(per_trainer) == last["trainers"] and all(0 < r <= 1 for r in per_trainer)
    assert min(per_trainer) <= last["cache_hit_rate"] <= max(per_trainer)
    assert last["train_loss"] < first["train_loss"] and last["test_acc"] > 0.3
    assert (tmp_path / "run" / "checkpoint.pt").exists()


def _assert_steps_equal_reference(rank: dict, ref: dict) -> None:
    assert len(rank["record"]["grads"]) == len(ref["grads"]) == 3
    for got_step, want_step in zip(rank["record"]["grads"], ref["grads"]):
        for got, want in zip(got_step, want_step):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
    for got, want in zip(rank["params"], ref["params"]):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("samplers,trainers,depth,switches", [
    (1, 1, 2, True),  # the sampler is done after step 0: it takes jobs while P > 0
    (2, 1, 1, False),  # P = 0 on the last step (one job left, one trainer): no switch
])
def test_switching_steps_equal_one_process(samplers, trainers, depth, switches):
    """switching=true, staleness=0: on every rank (samplers included) each step's reduced
    gradient and the final parameters equal one process accumulating the step's micro-batches,
    whoever trained them; every job is sampled once and trained once."""
    ranks = spawn(_factored_fns.train_one_epoch, samplers + trainers, "factored", str(samplers),
                  depth, True)
    ref = _factored_fns.reference_epoch(trainers)
    for rank in ranks:
        _assert_steps_equal_reference(rank, ref)
    losses = {job: loss for r in ranks for job, loss in r["record"]["losses"]}
    every_job = sorted((0, s, t) for s in range(3) for t in range(trainers))
    assert sorted(losses) == every_job
    for (_, step, slot), loss in losses.items():
        assert loss == pytest.approx(ref["losses"][step][slot], rel=1e-5)
    assert _jobs(ranks, trainer=False) == every_job  # sampled once
    assert sorted(j for r in ranks for j in r["trained"]) == every_job  # trained once
    lead = ranks[0]["metrics"]
    standby = sum(len(r["trained"]) for r in ranks[trainers:])
    assert lead["switch_events"] == standby and (standby > 0) == switches
    assert lead["standby_jobs"] == standby
    assert lead["samples_produced"] == len(every_job)
    assert sum(r["metrics"]["samples_consumed"] for r in ranks[:trainers]) == len(every_job)
    if switches:
        assert lead["standby_train_time"] > 0


def test_bad_switching_and_staleness_fail_clearly(tmp_path, tiny_graph):
    for override, match in [("strategy.staleness=-1", "integer >= 0"),
                            ("strategy.staleness=1.5", "integer >= 0"),
                            ("strategy.switching=maybe", "strategy.switching")]:
        try:
            cfg = make_cfg(tmp_path, *TINY, "strategy=factored", "dist.world_size=2", override)
        except Exception as err:  # the typed schema may refuse first: it must name the key
            assert override.split("=")[0] in str(err)
            continue
        with pytest.raises(ConfigError, match=match):
            Factored.check(cfg, Checked.build(cfg, tiny_graph))
    cfg = make_cfg(tmp_path, *TINY, "strategy=factored", "dist.world_size=1",
                   "strategy.staleness=2")
    with pytest.raises(ConfigError, match="world_size=1"):
        Factored.check(cfg, Checked.build(cfg, tiny_graph))


@pytest.mark.slow
def test_staleness_trains_within_the_synchronous_band(tmp_path):
    """staleness=2 (ranks up to 2 steps ahead; no exact reference): through the runner
    (switching off, the default), training converges into the synchronous run's band."""
    last = {}
    for k in (0, 2):
        out = run(make_cfg(tmp_path / str(k), *TINY, "strategy=factored", "dist.world_size=3",
                           "epochs=3", "strategy.samplers=1", f"strategy.staleness={k}"))
        first, last[k] = out["history"][0], out["history"][-1]
        assert last[k]["samples_produced"] == last[k]["samples_consumed"] > 0
        assert last[k]["train_loss"] < first["train_loss"]
    assert last[2]["test_acc"] > 0.3
    assert abs(last[2]["test_acc"] - last[0]["test_acc"]) <= 0.1


@pytest.mark.slow
def test_presc_hotness_from_the_samplers_equals_one_process():
    """cache=presample: 2 samplers split the pre-sampling for 2 trainers; each trainer caches
    exactly the set one process picks with the policy's own pre-sampling (2 ranks' draws),
    and reports its own hit rate."""
    ranks = spawn(_factored_fns.presc_cache, 4, "2")
    want = _factored_fns.presc_reference(trainers=2)
    assert [r["trainer"] for r in ranks] == [True, True, False, False]
    assert len(want) == 60
    for r in ranks[:2]:
        assert r["cached"] == want
        assert r["presample_time"] > 0 and r["metrics"]["presample_time"] > 0


@pytest.mark.slow
def test_switched_loss_is_the_global_batch_mean_like_data(tmp_path):
    """With switching on, factored reports the mean loss over the global batch, as data does
    on the same sample sequence (2 trainers = data's 2 ranks), not the sum over trainers."""
    common = (*TINY, "epochs=1", "model.dropout=0", "eval_every=0")
    data = run(make_cfg(tmp_path / "d", *common, "strategy=data", "dist.world_size=2"))
    fact = run(make_cfg(tmp_path / "f", *common, "strategy=factored", "dist.world_size=3",
                        "strategy.samplers=1", "strategy.switching=true"))
    assert fact["history"][0]["trainers"] == 2
    assert fact["history"][0]["train_loss"] == pytest.approx(data["history"][0]["train_loss"],
                                                             rel=1e-4)


@pytest.mark.slow
def test_switched_runs_and_a_resumed_one_give_identical_losses(tmp_path):
    """Dropout masks of a job are keyed by (seed, epoch, step, vertex), whichever rank trains
    it: two switched runs and a run resumed from its checkpoint give the same losses."""
    common = (*TINY, "strategy=factored", "dist.world_size=3", "strategy.samplers=1",
              "strategy.switching=true", "model.dropout=0.5", "eval_every=0")

    def losses(where, *extra):
        out = run(make_cfg(tmp_path / where, *common, *extra))
        assert out["history"][-1]["standby_jobs"] > 0  # the sampler did train jobs
        return [h["train_loss"] for h in out["history"]]

    first = losses("a", "epochs=2")
    assert losses("b", "epochs=2") == first
    losses("c", "epochs=1")
    assert losses("c", "epochs=2", "resume=true") == first
