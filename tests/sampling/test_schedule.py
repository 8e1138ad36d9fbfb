"""The one schedule (gnnscale.sampling.schedule): a Schedule draws exactly what the seeded
permutation, micro-batch cut and sample seeds give, and cache pre-sampling and partition
weights follow the task's own seeds (link prediction: endpoints and negatives, not train_idx)."""

from __future__ import annotations

import pytest
import torch

from gnnscale.cache.presample import PresamplePolicy
from gnnscale.data.graph import GraphStore
from gnnscale.partition import PartitionBook
from gnnscale.partition.provider import FixedPartition
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.schedule import (
    PRESAMPLE,
    TRAIN,
    Schedule,
    epoch_batches,
    micro_batch,
    sample_seed,
)
from gnnscale.tasks.link import LinkTask

FANOUTS = [4, 3]


@pytest.mark.parametrize("slots,min_size,stream", [(1, 1, TRAIN), (3, 1, TRAIN),
                                                   (4, 4, PRESAMPLE), (1, 4, TRAIN)])
def test_schedule_draws_the_seeded_permutation_cut_and_seeds(slots, min_size, stream):
    idx = torch.arange(7, 7 + 203)
    sched = Schedule(idx, batch_size=32, seed=5, slots=slots, min_size=min_size, stream=stream)
    for epoch in (0, 3):
        want = epoch_batches(idx, 32, 5, epoch, stream, min_size=max(slots, min_size))
        got = sched.batches(epoch)
        assert len(got) == len(want) == sched.num_steps(epoch)
        assert all(torch.equal(a, b) for a, b in zip(got, want))
        draws = list(sched.draws(epoch))
        assert [(d.epoch, d.step, d.slot) for d in draws] == [
            (epoch, s, j) for s in range(len(want)) for j in range(slots)]
        for d in draws:
            items = micro_batch(want[d.step], slots, d.slot)
            assert torch.equal(d.items, items)
            assert torch.equal(sched.items(epoch, d.step, d.slot), items)
            assert torch.equal(d.seeds, items)  # no task: the items are the seeds (nodes)
            assert d.sample_seed == sched.sample_seed(epoch, d.step, d.slot) == \
                sample_seed(5, epoch, d.step, d.slot, stream)
            assert sched.draw(epoch, d.step, d.slot).sample_seed == d.sample_seed
    # one permutation per epoch, kept: the same tensors on every call
    assert sched.batches(3)[0].data_ptr() == sched.batches(3)[0].data_ptr()
    some = list(sched.draws(3, slots=[slots - 1], steps=[1, 2]))
    assert [(d.step, d.slot) for d in some] == [(1, slots - 1), (2, slots - 1)]
    with pytest.raises(ValueError, match="no target function"):
        sched.target(3, 1, 0)


@pytest.mark.parametrize("slots", [2, 3, 5])
def test_a_step_cut_into_slots_computes_what_one_slot_does(slots):
    """Every slot of a step shares the step's sample seed and the sampler keys each vertex's
    draw by it, so each target's output (a 2-layer SAGE on its sampled blocks) is the same
    whichever micro-batch holds it: ``data`` on any number of ranks is one process."""
    from tests._data_fns import make_graph, make_model

    graph = make_graph()
    model = make_model(graph).eval()
    sampler = NeighborSampler(FANOUTS)
    one = Schedule(graph.train_idx, batch_size=48, seed=2, slots=1)
    cut = Schedule(graph.train_idx, batch_size=48, seed=2, slots=slots)

    def rows(draws) -> tuple[torch.Tensor, torch.Tensor]:
        ids, out = [], []
        for d in draws:
            mb = sampler.sample(graph, d.seeds, d.sample_seed)
            ids.append(d.items)
            out.append(model(graph.x[mb.input_nodes], mb.blocks))
        return torch.cat(ids), torch.cat(out)

    with torch.no_grad():
        for step in range(one.num_steps(1)):
            ids, want = rows(one.draws(1, steps=[step]))
            got_ids, got = rows(cut.draws(1, steps=[step]))
            assert torch.equal(got_ids, ids)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    d = list(cut.draws(1, steps=[0]))
    assert len({x.sample_seed for x in d}) == 1 and d[0].sample_seed == one.sample_seed(1, 0)


def test_schedule_refuses_bad_input():
    with pytest.raises(ValueError, match="batch_size"):
        Schedule(torch.arange(5), batch_size=0, seed=0)
    with pytest.raises(ValueError, match="at least one slot"):
        Schedule(torch.arange(5), batch_size=2, seed=0, slots=0)
    with pytest.raises(ValueError, match="training items"):
        Schedule(torch.empty(0, dtype=torch.long), batch_size=2, seed=0)


def _link() -> tuple[LinkTask, GraphStore]:
    """A small link task on a graph that also has a (node) training split."""
    g = torch.Generator().manual_seed(21)
    n = 150
    ei = torch.randint(0, n, (2, 500), generator=g)
    graph = GraphStore.from_edge_index(ei, n, symmetrize=True, self_loops="remove",
                                       x=torch.randn(n, 8, generator=g),
                                       train_idx=torch.arange(0, n, 3), name="links")
    task = LinkTask(num_negatives=2, dim=8, decoder_hidden=8, val_fraction=0.1,
                    test_fraction=0.1)
    return task, task.prepare(graph, None, seed=0)


def _by_hand(task: LinkTask, graph: GraphStore, epochs: range, slots: int) -> torch.Tensor:
    """Visit counts replayed from the free functions and the task's seeds, stream PRESAMPLE."""
    counts = torch.zeros(graph.num_nodes, dtype=torch.float64)
    sampler = NeighborSampler(FANOUTS)
    for epoch in epochs:
        batches = epoch_batches(task.train_items(), 40, 3, epoch, PRESAMPLE, min_size=slots)
        for step, batch in enumerate(batches):
            for slot in range(slots):
                seeds = task.seeds(micro_batch(batch, slots, slot), epoch)
                mb = sampler.sample(graph, seeds, sample_seed(3, epoch, step, slot, PRESAMPLE))
                counts += torch.bincount(mb.input_nodes, minlength=graph.num_nodes)
    return counts


def test_presample_under_link_counts_the_link_task_seeds():
    task, graph = _link()
    schedule = Schedule.of(task, batch_size=40, seed=3, slots=5)  # a strategy's (any slots)
    pre = PresamplePolicy(ratio=0.2, epochs=2)
    got = pre.counts(graph, schedule=schedule, sampler=NeighborSampler(FANOUTS), world_size=2)
    assert torch.equal(got, _by_hand(task, graph, range(2), slots=2))
    nodes = Schedule(graph.train_idx, batch_size=40, seed=3)  # what it sampled before
    old = pre.counts(graph, schedule=nodes, sampler=NeighborSampler(FANOUTS), world_size=2)
    assert not torch.equal(got, old)


class _Recorded(FixedPartition):
    """A fixed book that keeps the vertex weights it was asked with (sample frequencies)."""

    wants_sample_frequency = True

    def get(self, num_parts, kind=None, vertex_weights=None):
        self.weights = vertex_weights
        return super().get(num_parts, kind, vertex_weights)


def test_partition_weights_under_link_count_the_link_task_seeds():
    from gnnscale.cache.none import NoCache
    from gnnscale.deps.depcache import DepCache
    from gnnscale.optim.adam import Adam
    from gnnscale.strategies.base import RunContext
    from gnnscale.strategies.data.strategy import DataParallel
    from tests._link_fns import CPU, make_model

    task, graph = _link()
    provider = _Recorded(PartitionBook.from_edge_cut(graph, torch.zeros(graph.num_nodes,
                                                                        dtype=torch.long), 1))
    ctx = RunContext(topo=CPU, graph=graph, model=make_model(task, graph),
                     sampler=NeighborSampler(FANOUTS), cache_policy=NoCache(), deps=DepCache(),
                     partition=provider, optim=Adam(lr=0.01), seed=3, task=task)
    DataParallel(ctx, batch_size=40).partition_book("edge_cut")
    assert torch.equal(provider.weights, _by_hand(task, graph, range(1), slots=1))
