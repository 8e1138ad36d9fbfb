"""footprint=true: FGNN's footprint similarity as a run metric, against a direct computation."""

import pytest
import torch

from gnnscale import registry
from gnnscale.cache.base import visit_counts
from gnnscale.evaluation.footprint import Footprint, footprint_similarity, top_membership
from gnnscale.runner.run import run
from gnnscale.sampling.schedule import Schedule
from tests._train import TINY, make_cfg


def test_similarity_on_hand_made_counts():
    """FGNN's sum of min(f_i, f_j) over T_i & T_j, over the sum of f_j over T_j."""
    before = torch.tensor([9, 0, 7, 0, 5, 0, 0, 0, 0, 0, 8, 1, 0, 0, 0, 0, 0, 0, 0, 6])
    after = torch.tensor([9, 0, 0, 0, 5, 0, 0, 0, 0, 0, 8, 1, 0, 0, 0, 0, 0, 0, 0, 0])
    assert top_membership(before).nonzero().flatten().tolist() == [0, 10]  # 10% of 20
    assert footprint_similarity(before, after) == 1.0
    # top 5: before {0, 10, 2, 19, 4}; after {0, 10, 4, 11} plus one of its 16 zeros
    assert top_membership(after, 0.25)[[0, 4, 10, 11, 1]].tolist() == [1, 1, 1, 1, 1 / 16]
    assert footprint_similarity(before, after, 0.25) == pytest.approx((9 + 8 + 5) / 23)
    # a tie at the cut: vertices 1, 2, 3 share the second slot of epoch i
    tied = torch.tensor([3, 2, 2, 2, 0, 0, 0, 0, 0, 0])
    later = torch.tensor([3, 2, 0, 0, 0, 0, 0, 0, 0, 0])
    assert footprint_similarity(tied, later, 0.2) == pytest.approx((3 + 2 / 3) / 5)
    fp = Footprint(20, top=0.25)
    fp.add(torch.tensor([0, 2, 4]))
    assert fp.end_epoch() is None  # nothing to compare the first epoch with
    fp.add(torch.tensor([0, 3]))
    fp.add(torch.tensor([0, 3, 5]))
    assert fp.end_epoch() == pytest.approx(1 / 5)  # only vertex 0 is shared: min(1, 2)
    with pytest.raises(ValueError, match="shape"):
        footprint_similarity(before, after[:5])
    with pytest.raises(ValueError, match="top"):
        top_membership(before, 0.0)


def test_without_ties_equals_the_reproduce_suites_formula():
    """With distinct counts the tie rule plays no part: the same figure as the FGNN formula
    in benchmarks/reproduce.py."""
    from benchmarks.reproduce import footprint_similarity as fgnn

    gen = torch.Generator().manual_seed(4)
    a, b = (torch.randperm(500, generator=gen).double() for _ in range(2))
    assert footprint_similarity(a, b) == pytest.approx(fgnn(a, b), abs=1e-12)
    assert 0.0 < footprint_similarity(a, b) < 1.0 and footprint_similarity(a, a) == 1.0


def _expected(cfg, epochs: int, world_size: int) -> list[float]:
    """One process replaying the training draws (``world_size`` micro-batches per step)."""
    graph = registry.build(cfg.dataset).load()
    sampler = registry.build(cfg.sampler)
    schedule = Schedule(graph.train_idx, batch_size=cfg.strategy.batch_size, seed=cfg.seed,
                        slots=world_size)
    counts = [visit_counts(graph, schedule=schedule, sampler=sampler, epochs=[e])
              for e in range(epochs)]
    return [footprint_similarity(a, b) for a, b in zip(counts, counts[1:])]


def _check(tmp_path, world_size: int, *overrides: str) -> list[dict]:
    cfg = make_cfg(tmp_path, *TINY, "epochs=3", "eval_every=0", "checkpoint=false",
                   "footprint=true", *overrides)
    history = run(cfg)["history"]
    assert "footprint_similarity" not in history[0]
    got = [h["footprint_similarity"] for h in history[1:]]
    want = _expected(cfg, 3, world_size)
    assert got == pytest.approx(want, abs=1e-12)
    assert all(0.3 < s < 1.0 for s in got)  # a real overlap, not all or nothing
    return history


def test_strategy_counts_every_trained_micro_batch():
    """In process: data on one rank counts each step's input nodes; the epochs' similarity
    equals a direct replay of the same draws."""
    from gnnscale.cache.none import NoCache
    from gnnscale.deps.depcache import DepCache
    from gnnscale.distributed.launch import Topology
    from gnnscale.optim.adam import Adam
    from gnnscale.sampling.neighbor import NeighborSampler
    from gnnscale.strategies.base import RunContext
    from gnnscale.strategies.data.strategy import DataParallel
    from tests._data_fns import FANOUTS, make_graph, make_model

    graph = make_graph()
    ctx = RunContext(topo=Topology(0, 1, 0, 1, torch.device("cpu")), graph=graph,
                     model=make_model(graph), sampler=NeighborSampler(FANOUTS),
                     cache_policy=NoCache(), deps=DepCache(), partition=None, seed=0,
                     optim=Adam(lr=0.01))
    strat = DataParallel(ctx, batch_size=40, prefetch=1)
    strat.footprint = Footprint(graph.num_nodes)
    strat.setup()
    got = []
    for epoch in range(3):
        strat.train_epoch(epoch)
        got.append(strat.footprint.end_epoch())
    schedule = Schedule(graph.train_idx, batch_size=40, seed=0)
    counts = [visit_counts(graph, schedule=schedule, sampler=NeighborSampler(FANOUTS),
                           epochs=[e]) for e in range(3)]
    assert got[0] is None
    want = [footprint_similarity(a, b) for a, b in zip(counts, counts[1:])]
    assert got[1:] == pytest.approx(want, abs=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("overrides", [
    ("strategy=split", "dist.world_size=2"),  # one shared sample per step
    # standby jobs counted too: a wide model makes a job's training outlast its sampling,
    # so the sampler is ahead with jobs waiting and its standby trainer takes some
    ("strategy=factored", "dist.world_size=2", "strategy.samplers=1",
     "strategy.switching=true", "strategy.batch_size=64", "model.hidden=512"),
], ids=["split", "factored-switching"])
def test_footprint_metric_across_ranks(tmp_path, overrides):
    """The same draws as one process (split samples once per step; factored with one trainer
    draws data's single-rank micro-batches), so the same similarity."""
    history = _check(tmp_path, 1, "sampler.fanouts=[2,2]", *overrides)
    if "strategy=factored" in overrides:  # the standby trainer's jobs reached rank 0
        assert sum(h["switch_events"] for h in history) > 0


def test_footprint_is_off_by_default(tmp_path):
    assert make_cfg(tmp_path, *TINY).footprint is False
