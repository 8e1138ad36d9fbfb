"""footprint=true: FGNN's footprint similarity as a run metric, against a direct computation."""

import pytest
import torch

from gnnscale import registry
from gnnscale.cache.base import visit_counts
from gnnscale.runner.footprint import Footprint, footprint_similarity, top_visited
from gnnscale.runner.run import run
from tests._train import TINY, make_cfg


def test_similarity_on_hand_made_counts():
    before = torch.tensor([9, 0, 7, 0, 5, 0, 0, 0, 0, 0, 8, 1, 0, 0, 0, 0, 0, 0, 0, 6])
    after = torch.tensor([9, 0, 0, 0, 5, 0, 0, 0, 0, 0, 8, 1, 0, 0, 0, 0, 0, 0, 0, 0])
    assert top_visited(before).tolist() == [0, 10]  # 10% of 20 vertices
    assert top_visited(before, 0.25).tolist() == [0, 10, 2, 19, 4]
    assert footprint_similarity(before, after) == 1.0
    assert footprint_similarity(before, after, 0.25) == pytest.approx(3 / 5)  # 0, 10, 4
    fp = Footprint(20, top=0.25)
    fp.add(torch.tensor([0, 2, 4]))
    assert fp.end_epoch() is None  # nothing to compare the first epoch with
    fp.add(torch.tensor([0, 3]))
    fp.add(torch.tensor([0, 3, 5]))
    assert fp.end_epoch() == pytest.approx(4 / 5)  # top 5 {0,2,4,1,3} -> {0,3,5,1,2}
    with pytest.raises(ValueError, match="shape"):
        footprint_similarity(before, after[:5])


def _expected(cfg, epochs: int, world_size: int) -> list[float]:
    """One process replaying the training draws (``world_size`` micro-batches per step)."""
    graph = registry.build(cfg.dataset).load()
    sampler = registry.build(cfg.sampler)
    counts = [visit_counts(graph, train_idx=graph.train_idx, sampler=sampler,
                           batch_size=cfg.strategy.batch_size, seed=cfg.seed, epochs=[e],
                           world_size=world_size)
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
    from gnnscale.executor.base import RunContext
    from gnnscale.executor.data import DataParallel
    from gnnscale.optim.adam import Adam
    from gnnscale.sampling.neighbor import NeighborSampler
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
    counts = [visit_counts(graph, train_idx=graph.train_idx, sampler=NeighborSampler(FANOUTS),
                           batch_size=40, seed=0, epochs=[e]) for e in range(3)]
    assert got[0] is None
    assert got[1:] == [footprint_similarity(a, b) for a, b in zip(counts, counts[1:])]


@pytest.mark.slow
@pytest.mark.parametrize("overrides", [
    ("strategy=split", "dist.world_size=2"),  # one shared sample per step
    ("strategy=factored", "dist.world_size=2", "strategy.samplers=1",
     "strategy.switching=true", "strategy.batch_size=64"),  # standby jobs counted too
], ids=["split", "factored-switching"])
def test_footprint_metric_across_ranks(tmp_path, overrides):
    """The same draws as one process (split samples once per step; factored with one trainer
    draws data's single-rank micro-batches), so the same similarity."""
    history = _check(tmp_path, 1, "sampler.fanouts=[2,2]", *overrides)
    if "strategy=factored" in overrides:  # the standby trainer's jobs reached rank 0
        assert sum(h["switch_events"] for h in history) > 0


def test_footprint_is_off_by_default(tmp_path):
    assert make_cfg(tmp_path, *TINY).footprint is False
