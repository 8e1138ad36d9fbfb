"""strategy=factored: sampler ranks feed trainer ranks; with no staleness a step equals data."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from gnnscale.distributed import RankFailed, spawn
from gnnscale.distributed.launch import Topology
from gnnscale.errors import ConfigError
from gnnscale.runner.run import run
from gnnscale.sampling.base import Block, MiniBatch
from gnnscale.strategies.base import Checked
from gnnscale.strategies.factored.allocation import allocate, parse_samplers
from gnnscale.strategies.factored.hosts import HostPlan
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


def _assert_each_job_once(ranks: list[dict], ref: dict, every_job: list) -> None:
    """Every job sampled once by the samplers and trained once, its loss one process's."""
    losses = {job: loss for r in ranks if r["record"] for job, loss in r["record"]["losses"]}
    assert sorted(losses) == every_job
    for (_, step, slot), loss in losses.items():
        assert loss == pytest.approx(ref["losses"][step][slot], rel=1e-5)
    assert _jobs(ranks, trainer=False) == every_job  # sampled once
    assert sorted(j for r in ranks for j in r["trained"]) == every_job  # trained once


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
              Block(torch.tensor([[1], [0]]), (2, 1), torch.tensor([8, 6]),
                    e_id=torch.tensor([12]), edge_type=torch.tensor([1])),
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
        for name in ("e_id", "edge_type"):  # the codec's fields travel through the queue too
            a, b = getattr(got, name), getattr(want, name)
            assert (a is None) == (b is None) and (b is None or torch.equal(a, b))
    assert body.numel() == body_size(header)


@pytest.mark.slow
@pytest.mark.parametrize("queue", ["routes", "shared"])
@pytest.mark.parametrize("switching", [False, True])
def test_dead_sampler_ends_the_run(switching, queue):
    with pytest.raises(RankFailed, match="sampler died mid-epoch"):
        spawn(_factored_fns.sampler_dies, 2, switching, queue, timeout_s=60.0, grace_s=2.0)


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
    every_job = sorted((0, s, t) for s in range(3) for t in range(trainers))
    _assert_each_job_once(ranks, ref, every_job)
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
    on the same sample sequence (2 trainers with 2 jobs each per step = data's 4 ranks), not
    the sum over jobs."""
    common = (*TINY, "epochs=1", "model.dropout=0", "eval_every=0")
    data = run(make_cfg(tmp_path / "d", *common, "strategy=data", "dist.world_size=4"))
    fact = run(make_cfg(tmp_path / "f", *common, "strategy=factored", "dist.world_size=3",
                        "strategy.samplers=1", "strategy.switching=true",
                        "strategy.jobs_per_trainer=2"))
    assert fact["history"][0]["trainers"] == 2
    assert fact["history"][0]["train_loss"] == pytest.approx(data["history"][0]["train_loss"],
                                                             rel=1e-4)


@pytest.mark.slow
def test_switched_runs_and_a_resumed_one_give_identical_losses(tmp_path):
    """Fixed routes: dropout masks of a job are keyed by (seed, epoch, step, vertex), whichever
    rank trains it: two switched runs and a run resumed from its checkpoint give the same
    losses."""
    common = (*TINY, "strategy=factored", "dist.world_size=3", "strategy.samplers=1",
              "strategy.queue=routes", "strategy.switching=true", "model.dropout=0.5",
              "eval_every=0")

    def losses(where, *extra):
        out = run(make_cfg(tmp_path / where, *common, *extra))
        assert out["history"][-1]["standby_jobs"] > 0  # the sampler did train jobs
        return [h["train_loss"] for h in out["history"]]

    first = losses("a", "epochs=2")
    assert losses("b", "epochs=2") == first
    losses("c", "epochs=1")
    assert losses("c", "epochs=2", "resume=true") == first


# -- the shared queue (strategy.queue=shared): one ring, any trainer takes the next job -------
def _every_job(trainers: int, epochs: int = 1) -> list:
    return sorted((e, s, t) for e in range(epochs) for s in range(3) for t in range(trainers))


@pytest.mark.slow
@pytest.mark.parametrize("samplers,trainers", [(1, 1), (1, 3), (2, 2)])
def test_shared_queue_matches_one_process_routes_and_data(samplers, trainers):
    """Whichever trainer takes which job, every step's reduced gradient and the final
    parameters equal one process (so data with T ranks) and the fixed routes; each job is
    sampled once and trained once; a second run gives the same bits."""
    world = samplers + trainers
    # train_one_epoch(topo, kind, samplers, queue_depth, switching, staleness, epochs, sampler,
    #                 queue, prefetch)
    ranks = spawn(_factored_fns.train_one_epoch, world, "factored", str(samplers), 1, False, 0,
                  1, "neighbor", "shared")
    ref = _factored_fns.reference_epoch(trainers)
    for rank in ranks[:trainers]:
        _assert_steps_equal_reference(rank, ref)
    every_job = _every_job(trainers)
    _assert_each_job_once(ranks, ref, every_job)
    lead = ranks[0]["metrics"]
    assert lead["queue_shared"] == 1 and lead["samples_produced"] == len(every_job)
    assert lead["queue_bytes"] == sum(r["metrics"]["bytes_queue_received"]
                                      for r in ranks[:trainers]) > 0
    for r, rank in enumerate(ranks[:trainers]):  # each trainer reports the jobs it took
        assert rank["metrics"][f"queue_jobs_rank_{r}"] == len(rank["trained"])
    routes = spawn(_factored_fns.train_one_epoch, world, "factored", str(samplers), 1)
    data = (spawn(_factored_fns.train_one_epoch, trainers, "data") if trainers > 1 else
            [_factored_fns.train_one_epoch(CPU1, "data")])
    for other in (routes[0], data[0]):
        for got, want in zip(ranks[0]["params"], other["params"]):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
    again = spawn(_factored_fns.train_one_epoch, world, "factored", str(samplers), 1, False, 0,
                  1, "neighbor", "shared", 0)  # no prefetch: other takers, the same bits
    for got, want in zip(again[0]["params"], ranks[0]["params"]):
        assert torch.equal(got, want)


@pytest.mark.slow
@pytest.mark.parametrize("switching", [False, True])
def test_shared_queue_with_staleness_equals_routes(switching):
    """staleness=2: a job of step s trains on the parameters after step s - 3 whoever takes it,
    as on fixed routes, so both queues give the same steps (2 epochs, 1 sampler, 2 trainers);
    with switching the sampler's standby jobs are part of it."""
    args = ("factored", "1", 2, switching, 2, 2, "neighbor")
    # no prefetch and trainer 1 slowed (0.2 s a job): jobs wait in the ring for a free trainer,
    # so the standby finds some on any host's timing
    shared = spawn(_factored_fns.train_one_epoch, 3, *args, "shared", 0, 1, 1, 1)
    routes = spawn(_factored_fns.train_one_epoch, 3, "factored", "1", 2, False, 2, 2,
                   "neighbor", "routes")
    want = routes[0]["record"]["grads"]
    for rank in shared[: 3 if switching else 2]:  # every rank that holds a replica
        assert len(rank["record"]["grads"]) == len(want) == 6
        for got_step, want_step in zip(rank["record"]["grads"], want):
            for got, w in zip(got_step, want_step):
                torch.testing.assert_close(got, w, rtol=1e-4, atol=1e-6)
        for got, w in zip(rank["params"], routes[0]["params"]):
            torch.testing.assert_close(got, w, rtol=1e-4, atol=1e-6)
    every_job = _every_job(2, epochs=2)[-6:]  # the last epoch's jobs (the logs are per epoch)
    assert sorted(j for r in shared for j in r["trained"]) == every_job
    assert _jobs(shared, trainer=False) == every_job
    lead = shared[0]["metrics"]
    assert lead["standby_jobs"] == len(shared[2]["trained"])
    assert lead["queue_jobs_rank_2"] == lead["standby_jobs"]
    if not switching:
        assert lead["standby_jobs"] == 0
    else:  # the sampler trained jobs (over both epochs), and they are in the steps above
        assert len(shared[2]["record"]["losses"]) > 0


@pytest.mark.slow
def test_shared_queue_runs_are_bit_identical_and_resume(tmp_path):
    """Through the runner with dropout: two shared-queue runs, one with switching, and a run
    resumed from its checkpoint give the same losses to the bit (per-slot reduction, dropout
    keyed by step and vertex); fixed routes give those of one job per trainer within
    rounding."""
    common = (*TINY, "strategy=factored", "dist.world_size=3", "strategy.samplers=1",
              "model.dropout=0.5", "eval_every=0")

    def losses(where, *extra):
        out = run(make_cfg(tmp_path / where, *common, *extra))
        return [h["train_loss"] for h in out["history"]]

    first = losses("a", "epochs=2")
    assert losses("b", "epochs=2", "strategy.switching=true", "strategy.prefetch=0") == first
    losses("c", "epochs=1")
    assert losses("c", "epochs=2", "resume=true") == first
    # one job per trainer and step (auto cuts a step into 2 per trainer here): routes' jobs
    one = losses("e", "epochs=2", "strategy.jobs_per_trainer=1")
    routes = losses("d", "epochs=2", "strategy.queue=routes", "strategy.switching=true")
    assert routes == pytest.approx(one, rel=1e-4)


@pytest.mark.slow
def test_jobs_per_trainer_equal_one_process_and_the_same_bits_whoever_trains():
    """jobs_per_trainer=2, 1 sampler and 2 trainers: a step is 4 jobs. Each step's reduced
    gradient equals one process with 4 micro-batches and the parameters data with 4 ranks.
    Trainer 1 slowed, then trainer 0 slowed: the faster trainer takes more of each step's jobs
    (different assignments), and the parameters are the same bits."""
    # train_one_epoch(topo, kind, samplers, queue_depth, switching, staleness, epochs, sampler,
    #                 queue, prefetch, hosts, jobs_per_trainer, slow_rank)
    args = ("factored", "1", 1, False, 0, 1, "neighbor", "shared", 1, 1, 2)
    slow1 = spawn(_factored_fns.train_one_epoch, 3, *args, 1)
    slow0 = spawn(_factored_fns.train_one_epoch, 3, *args, 0)
    ref = _factored_fns.reference_epoch(4)
    for rank in slow1[:2] + slow0[:2]:
        _assert_steps_equal_reference(rank, ref)
    every_job = _every_job(4)
    _assert_each_job_once(slow1, ref, every_job)
    _assert_each_job_once(slow0, ref, every_job)
    took1 = [len(r["trained"]) for r in slow1[:2]]
    took0 = [len(r["trained"]) for r in slow0[:2]]
    assert took1[0] > took1[1] and took0[1] > took0[0], (took1, took0)
    for got, want in zip(slow0[0]["params"], slow1[0]["params"]):
        assert torch.equal(got, want)
    assert slow1[0]["metrics"]["samples_produced"] == len(every_job)
    data = spawn(_factored_fns.train_one_epoch, 4, "data")
    for got, want in zip(slow1[0]["params"], data[0]["params"]):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


def test_job_ring_orders_bounds_and_times_out():
    """One process: jobs come out in job order, a full ring refuses the next job until the
    oldest is taken, a job too large for a slot is refused, and a wait that sees no progress
    ends in a TimeoutError."""
    from gnnscale.distributed.ring import JobRing

    ring = JobRing.create(slots=2, slot_bytes=4096, procs=1, timeout_s=0.2)
    try:
        ring.start(10)
        assert ring.claim_make(12) == 10 and ring.claim_make(12) == 11
        assert ring.claim_make(12) is None  # every job below the end is claimed
        assert ring.try_take(12) is None  # nothing made yet
        assert ring.try_put(11, [torch.tensor([7, 8])], 0)  # out of order: fine
        assert ring.try_take(12) is None  # job 10 comes first
        assert ring.try_put(10, [torch.tensor([1]), torch.tensor([], dtype=torch.long)], 0)
        assert not ring.try_put(12, [torch.tensor([3])], 0)  # full: slot 0 still holds job 10
        job, parts = ring.try_take(13)
        assert job == 10 and [p.tolist() for p in parts] == [[1], []]
        assert ring.try_put(12, [torch.tensor([3])], 0)  # job 10's slot is free again
        assert ring.ready() == 2 and ring.head_ready()
        assert ring.try_take(13)[0] == 11 and ring.try_take(13)[0] == 12
        with pytest.raises(ValueError, match="does not fit"):
            ring.try_put(14, [torch.zeros(1000, dtype=torch.long)], 0)
        with pytest.raises(TimeoutError, match="timed out"):
            ring.wait(lambda: ring.try_take(20), lambda: ring.next_take, "job 13")
    finally:
        ring.close()


@pytest.mark.slow
def test_job_ring_across_processes():
    """4 processes: 3 make jobs (claimed in turn), all 4 take; every job is taken once, each
    taker sees its jobs in order, payloads arrive intact."""
    ranks = spawn(_factored_fns.ring_round_trip, 4, 60, 3)
    made = sorted(j for r in ranks for j in r["made"])
    taken = sorted(j for r in ranks for j, _ in r["taken"])
    assert made == taken == list(range(100, 160))
    for r in ranks:
        jobs = [j for j, _ in r["taken"]]
        assert jobs == sorted(jobs)
        for j, parts in r["taken"]:
            assert parts == [list(range(j % 7 + 1)), [j] * (j % 3)]


def test_host_plans():
    """One ring per host with trainers, serving its trainers' slots; a host without samplers
    is fed by every sampler elsewhere, a host of samplers only feeds every ring."""
    one = HostPlan.build([0, 0, 0], trainers=2)
    assert one.slots == {0: (0, 1)} and one.local == {0: (2,)} and one.remote == {}
    mixed = HostPlan.build([0, 0, 2, 2], trainers=3)  # host 0: trainers only
    assert mixed.slots == {0: (0, 1), 2: (2,)} and mixed.local == {0: (), 2: (3,)}
    assert mixed.remote == {0: (3,)} and mixed.relays_fed_by(3) == (0,)
    spare = HostPlan.build([0, 0, 2, 2, 4, 4], trainers=3)  # host 4: samplers only
    assert spare.remote == {0: (3, 4, 5), 2: (4, 5)} and spare.ring_of(4) is None
    jobs = spare.jobs(0, steps=3)
    assert (jobs.base(1), jobs.end(1)) == (6, 12) and jobs.locate(9, 1) == (1, 1)
    # 2 jobs per trainer and step: job slot j is trainer j mod 3's, on its host
    micro = HostPlan.build([0, 0, 2, 2], trainers=3, per_trainer=2)
    assert micro.slots == {0: (0, 1, 3, 4), 2: (2, 5)}
    jobs = micro.jobs(0, steps=3)
    assert jobs.per_step == 4 and jobs.end(0) == 12 and jobs.locate(7, 0) == (1, 4)


def test_a_steps_last_jobs_go_to_a_free_trainer():
    """Several jobs per trainer and step (one process, a real ring): a trainer that holds a
    job claims ahead only jobs before the step's last T - 1; a free trainer claims any."""
    from gnnscale.distributed.ring import JobRing
    from gnnscale.strategies.factored.shared import Feeder

    ring = JobRing.create(slots=8, slot_bytes=4096, procs=1, timeout_s=5.0)
    try:
        ring.start(0)
        for job in range(8):  # 2 steps of 4 jobs (2 trainers, 2 jobs each)
            assert ring.claim_make(8) == job
            assert ring.try_put(job, [torch.tensor([job])], 0)
        feeder = Feeder(None, ring, 0, 8, 0, None, per_step=4, tail=1)
        assert feeder._claim()[0] == 0 and feeder._claim()[0] == 1
        assert feeder._claim()[0] == 2  # held 0, 1: job 2 is not among step 0's last 1
        assert feeder._claim() is None and ring.next_take == 3  # job 3 is: held back
        for job in (0, 1, 2):
            feeder.done(job)
        assert feeder._claim()[0] == 3  # free: it takes the step's last job
        assert feeder._claim()[0] == 4  # the next step's first, ahead of job 3
        untailed = Feeder(None, ring, 0, 8, 0, None, per_step=4, tail=0)
        assert [untailed._claim()[0] for _ in range(3)] == [5, 6, 7]  # one job per trainer
    finally:
        ring.close()


@pytest.mark.slow
@pytest.mark.parametrize("samplers,switching", [
    (1, False),  # host 0 (trainers 0, 1) is fed over the network by sampler 3 of host 1,
    (1, True),   # which also feeds its host's trainer 2 (and may train its jobs, switching)
    (2, False),  # host 1 holds samplers only: both feed host 0's ring over the network
])
def test_rings_across_hosts_equal_one_process(samplers, switching):
    """4 ranks taken for 2 hosts: each host with trainers has its own ring, remote samplers
    feed it through its relay; every job is sampled once and trained once, every step's
    reduced gradient equals one process, and the parameters equal strategy=data."""
    trainers = 4 - samplers
    # train_one_epoch(topo, kind, samplers, queue_depth, switching, staleness, epochs, sampler,
    #                 queue, prefetch, hosts)
    ranks = spawn(_factored_fns.train_one_epoch, 4, "factored", str(samplers), 1, switching, 0,
                  2, "neighbor", "shared", 1, 2)
    ref = _factored_fns.reference_epoch(trainers)
    last = [j for j in _every_job(trainers, epochs=2) if j[0] == 1]  # the last epoch's jobs
    assert _jobs(ranks, trainer=False) == last  # sampled once, by the samplers
    assert sorted(j for r in ranks for j in r["trained"]) == last  # trained once
    one_epoch = spawn(_factored_fns.train_one_epoch, 4, "factored", str(samplers), 1,
                      switching, 0, 1, "neighbor", "shared", 1, 2)
    for rank in one_epoch[:trainers]:
        _assert_steps_equal_reference(rank, ref)
    data = spawn(_factored_fns.train_one_epoch, trainers, "data", "1", 1, False, 0, 2)
    for got, want in zip(ranks[0]["params"], data[0]["params"]):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
    lead = ranks[0]["metrics"]
    assert lead["queue_shared"] == 1 and lead["samples_produced"] == len(last)
    # the jobs host 1's sampler trained from its own ring (as many as GNNLab's rule found
    # worth it: timing decides; none without switching) are counted as the standby's
    assert lead["standby_jobs"] == sum(len(r["trained"]) for r in ranks[trainers:])
    assert switching or lead["standby_jobs"] == 0


def test_bad_queue_settings_fail_clearly(tmp_path, tiny_graph):
    for override, match in [("strategy.queue=maybe", "strategy.queue must be shared"),
                            ("strategy.prefetch=-1", "strategy.prefetch must be"),
                            ("strategy.queue_slot_mb=0", "strategy.queue_slot_mb must be"),
                            ("strategy.jobs_per_trainer=0", "jobs_per_trainer must be 'auto'"),
                            ("strategy.jobs_per_trainer=two", "jobs_per_trainer must be"),
                            ("strategy.queue=routes strategy.jobs_per_trainer=2",
                             "jobs_per_trainer=2 needs strategy.queue=shared"),
                            ("dist.world_size=1 strategy.jobs_per_trainer=2",
                             "jobs_per_trainer > 1 with dist.world_size=1")]:
        cfg = make_cfg(tmp_path, *TINY, "strategy=factored", "dist.world_size=2",
                       *override.split())
        with pytest.raises(ConfigError, match=match):
            Factored.check(cfg, Checked.build(cfg, tiny_graph))
    for jobs in ("auto", "1", "4"):  # accepted on the shared queue
        cfg = make_cfg(tmp_path, *TINY, "strategy=factored", "dist.world_size=2",
                       f"strategy.jobs_per_trainer={jobs}")
        Factored.check(cfg, Checked.build(cfg, tiny_graph))


def _children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(stat[1]) == pid:
                kids.append(int(entry.name))
        except (ValueError, OSError, IndexError):
            continue
    return kids


def _ranks_of(launcher: int) -> list[int]:
    """The ranks of a train.py launcher: its fork server's children, in rank order."""
    ranks = []
    for kid in _children(launcher):
        cmd = Path(f"/proc/{kid}/cmdline").read_text()
        if "forkserver" in cmd:
            ranks += _children(kid)
    return sorted(ranks)


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_shared_queue_leaves_no_shared_memory_when_a_rank_is_killed(tmp_path):
    """The ring lives in an anonymous memfd: while train.py runs, the ranks map it and nothing
    of theirs is in /dev/shm; SIGKILL the sampler mid-run: the run ends non-zero, no rank
    outlives it and /dev/shm holds nothing new."""
    shm = Path("/dev/shm")
    before = set(os.listdir(shm))
    cmd = [sys.executable, "train.py", *TINY, "strategy=factored", "dist.world_size=3",
           "strategy.samplers=1", "epochs=100000", "dist.timeout_s=30",
           f"run_dir={tmp_path / 'run'}", f"data_root={tmp_path / 'data'}"]
    proc = subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[2], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    ranks: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "run" / "metrics.jsonl").exists():  # ranks are training
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "no epoch finished in 120 s"
            time.sleep(0.2)
        ranks = _ranks_of(proc.pid)
        assert len(ranks) == 3
        for pid in ranks:
            maps = Path(f"/proc/{pid}/maps").read_text()
            assert "/memfd:gnnscale-ring" in maps  # the ring, by no name in any folder
            shm_files = [line.split()[5] for line in maps.splitlines() if "/dev/shm/" in line]
            assert [f for f in shm_files if not _semaphore(f)] == []
        os.kill(ranks[2], signal.SIGKILL)  # the sampler
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in ranks:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode != 0 and "rank 2" in out, out
    deadline = time.monotonic() + 10
    while any(_running(p) for p in ranks) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in ranks if _running(p)], "a rank outlived the run"
    ours = {proc.pid, *ranks}
    new = {f for f in set(os.listdir(shm)) - before
           if not _semaphore(f) and not _another_process(f, ours)}
    assert new == set()


def _another_process(name: str, pids: set[int]) -> bool:
    """A file torch names for a process outside ``pids`` (``torch_<pid>_...``): another test's
    or program's, running beside this one on the host (pytest-xdist's other worker)."""
    found = re.match(r"torch_(\d+)_", name)
    return found is not None and int(found.group(1)) not in pids


def _semaphore(name: str) -> bool:
    """A POSIX semaphore (``sem.*``): the launcher's multiprocessing locks and queues, not
    shared memory of the strategy's (other processes of the host make them too)."""
    return Path(name).name.startswith("sem.")
