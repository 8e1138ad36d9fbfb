"""gnnscale.ops.split_sample on its own: a two-rank split worked out by hand, and its checks."""

import pytest
import torch

from gnnscale.ops.split import split_sample

# targets {0, 1}; inputs {0, 1, 2, 3}; block edges 2->0, 3->0, 1->0, 3->1; rank = id % 2
COUNTS = torch.tensor([2, 4])
EDGES = [torch.tensor([[2, 3, 1, 3], [0, 0, 0, 1]])]
OWNER = torch.tensor([0, 1, 0, 1], dtype=torch.int32)
NO_COSTS = torch.zeros(6, dtype=torch.float64)


def _plan(rank: int, preagg: bool = False) -> list[list]:
    out = split_sample(COUNTS, EDGES, OWNER, OWNER, 2, rank, preagg, NO_COSTS, 0)
    assert len(out) == 2 + 8
    for threads in (1, 2, 4):  # ranks are planned in parallel: any thread count, one plan
        again = split_sample(COUNTS, EDGES, OWNER, OWNER, 2, rank, preagg, NO_COSTS, 0, threads)
        assert all(map(torch.equal, again, out))
    return [t.tolist() for t in out]


def test_rank0_receives_the_rows_it_lacks():
    loaded, stats, dst, src, ei, gather, send, send_c, recv_c, agg = _plan(0)
    assert loaded == [0, 2]
    # edges per rank, local edges, all edges, replicated, rows all ranks receive in layer 0
    assert stats == [3, 1, 2, 4, 0, 2]
    assert dst == [0] and src == [0, 1, 2, 3]
    assert gather == [0, 2, 1, 3]    # own rows 0, 2 are h[0], h[1]; 1, 3 arrive after them
    assert ei == [[2, 3, 1], [0, 0, 0]]
    assert send == [] and send_c == [0, 0] and recv_c == [0, 2] and agg == [[], [], []]


def test_rank1_sends_what_rank0_needs():
    loaded, stats, dst, src, ei, gather, send, send_c, recv_c, agg = _plan(1)
    assert loaded == [1, 3] and stats == [3, 1, 2, 4, 0, 2]
    assert dst == [1] and src == [1, 3] and gather == [0, 1] and ei == [[1], [0]]
    assert send == [0, 1] and send_c == [2, 0] and recv_c == [0, 0]


def test_preaggregation_sends_one_row_per_destination():
    r0, r1 = _plan(0, preagg=True), _plan(1, preagg=True)
    dst, src, ei, gather, send, send_c, recv_c, agg = r0[2:]
    assert src == [0, 2, 0] and gather == [0, 1, 2]  # a virtual row for rank 1's partial sum
    assert ei == [[1, 2, 2], [0, 0, 0]] and recv_c == [0, 1] and send == []
    dst, src, ei, gather, send, send_c, recv_c, agg = r1[2:]
    assert send == [2] and send_c == [1, 0]
    assert agg == [[1, 0], [0, 0], [2, 0]]           # rows 3 and 1 summed into slot 0 (2 edges)


def test_split_sample_checks_its_inputs():
    with pytest.raises(RuntimeError, match="bad rank/world"):
        split_sample(COUNTS, EDGES, OWNER, OWNER, 2, 2, False, NO_COSTS, 0)
    with pytest.raises(RuntimeError, match="one entry per layer"):
        split_sample(torch.tensor([2]), EDGES, OWNER, OWNER, 2, 0, False, NO_COSTS, 0)
    with pytest.raises(RuntimeError, match="owner out of"):
        split_sample(COUNTS, EDGES, OWNER * 3, OWNER, 2, 0, False, NO_COSTS, 0)
    with pytest.raises(RuntimeError, match="owners too short"):
        split_sample(COUNTS, EDGES, OWNER[:2], OWNER, 2, 0, False, NO_COSTS, 0)
    with pytest.raises(RuntimeError, match="costs must hold"):
        split_sample(COUNTS, EDGES, OWNER, OWNER, 2, 0, False, torch.zeros(5), 0)
    with pytest.raises(RuntimeError, match="edges must be"):
        split_sample(COUNTS, [EDGES[0][0]], OWNER, OWNER, 2, 0, False, NO_COSTS, 0)


def test_exchange_cost_takes_a_whole_layer_and_silences_it():
    """Given one exchange's fixed cost (t_sync), the split greedy takes all of a rank's
    remaining remote rows of a layer when recomputing them costs less than shuffling them plus
    the layer's two exchanges; a layer where no rank receives is reported silent (the stats'
    rows received per layer), and without t_sync the per-row greedy alone decides."""
    from gnnscale.deps.hybrid import Hybrid
    from gnnscale.sampling.neighbor import NeighborSampler
    from gnnscale.strategies.split.splitter import split_sample_all as split_all
    from tests._data_fns import make_graph
    from tests._split_fns import scattered_part

    g = make_graph()
    mb = NeighborSampler([4, 3]).sample(g, g.train_idx[:48], 0)
    part = scattered_part(g.num_nodes, 2).int()
    dims = [g.num_features, 16, g.num_classes]
    # a shuffled row costs less than recomputing it: the per-row greedy replicates nothing
    base = {"t_vertex": 1e-3, "t_edge": 1e-3, "t_comm": 1e-3}
    plans = {}
    for sync in (0.0, 1e6):
        deps = Hybrid(costs={**base, "t_sync": sync})
        deps.prepare()
        costs = deps.replication_costs(dims)
        costs[0] = 0.0  # layer-0 inputs come free (as when every rank reads its own)
        plans[sync] = split_all(mb, part, part, 2, costs=costs, budget=1 << 40)
    assert all(p.replicated == 0 for p in plans[0.0])
    assert all(lp.moves for p in plans[0.0] for lp in p.layers)
    silent = plans[1e6]
    assert sum(p.replicated for p in silent) > 0
    # layer 1's remote rows are all recomputed: no rank receives one, every rank skips it
    top = [p.layers[1] for p in silent]
    assert all(not lp.moves for lp in top)
    assert all(sum(lp.recv_counts) == 0 and sum(lp.send_counts) == 0 for lp in top)
    # layer 0 still moves (its rows are inputs, which this greedy never replicates)
    assert all(p.layers[0].moves for p in silent)
    # all ranks or none: a budget that holds one rank's rest but not the other's spares no
    # exchange, so neither takes its rest (the per-row greedy alone decides)
    rests = sorted(sum(p.layers[1].recv_counts) for p in plans[0.0])
    assert rests[0] < rests[1]
    deps = Hybrid(costs={**base, "t_sync": 1e6})
    deps.prepare()
    costs = deps.replication_costs(dims)
    costs[0] = 0.0
    tight = split_all(mb, part, part, 2, costs=costs, budget=rests[0])
    assert all(p.replicated == 0 for p in tight)
    assert all(lp.moves for p in tight for lp in p.layers)


def test_mu_discounts_recomputation_in_the_split_greedy():
    """``deps.mu`` (NeutronStar Eq. 3) scales a replica's compute, not the inputs it fetches:
    a smaller mu replicates more (before, split's greedy ignored it)."""
    from gnnscale.deps.hybrid import Hybrid
    from gnnscale.sampling.neighbor import NeighborSampler
    from gnnscale.strategies.split.splitter import split_sample as split_plan
    from tests._data_fns import make_graph
    from tests._split_fns import scattered_part

    g = make_graph()
    mb = NeighborSampler([4, 3]).sample(g, g.train_idx[:48], 0)
    part = scattered_part(g.num_nodes, 2).int()
    dims = [g.num_features, 16, g.num_classes]
    replicated = []
    for mu in (1.0, 0.5, 0.1):
        deps = Hybrid(costs={"t_vertex": 0.05, "t_edge": 0.05, "t_comm": 1.0}, mu=mu)
        deps.prepare()
        costs = deps.replication_costs(dims)
        assert torch.equal(costs[:3], deps.layer_costs(dims)[:3])  # communication unscaled
        assert torch.allclose(costs[3:-1], mu * deps.layer_costs(dims)[3:])
        assert costs[-1] == 0.0  # no t_sync given: an exchange costs only its rows
        replicated.append(split_plan(mb, part, part, 2, 0, costs=costs, budget=1 << 40).replicated)
    assert replicated[0] < replicated[1] < replicated[2]


@pytest.mark.parametrize("world,preagg,budget", [(2, False, 0), (3, True, 0), (4, False, 50)])
def test_split_sample_all_equals_each_ranks_split(world, preagg, budget):
    """The sample planned once for every rank gives each rank exactly its own split (on a
    sampled graph, with pre-aggregation and with the hybrid's replication)."""
    from gnnscale.data.synthetic import generate
    from gnnscale.ops.split import split_sample_all
    from gnnscale.sampling.neighbor import NeighborSampler
    from gnnscale.strategies.split.splitter import sample_counts

    graph = generate("tiny", seed=0)
    mb = NeighborSampler([5, 5, 5]).sample(graph, graph.train_idx[:64], 7)
    ids = mb.n_id[: mb.blocks[0].num_src]
    own = (ids % world).int()
    costs = torch.tensor([1.0] * 4 + [0.01] * 4 + [0.001] * 4, dtype=torch.float64)
    args = (sample_counts(mb), [b.edge_index for b in mb.blocks], own, (ids * 7 % world).int())
    every = split_sample_all(*args, world, preagg, costs, budget)
    assert len(every) == world
    for rank in range(world):
        one = split_sample(*args, world, rank, preagg, costs, budget)
        assert len(every[rank]) == len(one) and all(map(torch.equal, every[rank], one))


@pytest.mark.parametrize("world,budget", [(2, 0), (3, 0), (4, 50)])
def test_read_in_drops_only_the_input_shuffle(world, budget):
    """With ``read_in`` (every rank reads its layer-0 block's sources) nothing of layer 0 is
    shuffled: no loaded rows, layer 0's gather, send index and pre-aggregation empty, its
    counts and its row of the stats 0; every other output is the same as without it (its dst,
    src ids and edges, every later layer, the hybrid's replicas), on each rank and planned for
    all ranks at once; ``read_in`` with ``preagg`` is refused."""
    from gnnscale.data.synthetic import generate
    from gnnscale.ops.split import split_sample_all
    from gnnscale.sampling.neighbor import NeighborSampler
    from gnnscale.strategies.split.splitter import sample_counts

    graph = generate("tiny", seed=0)
    mb = NeighborSampler([5, 5, 5]).sample(graph, graph.train_idx[:64], 7)
    ids = mb.n_id[: mb.blocks[0].num_src]
    costs = torch.tensor([1.0] * 4 + [0.01] * 4 + [0.001] * 4, dtype=torch.float64)
    args = (sample_counts(mb), [b.edge_index for b in mb.blocks], (ids % world).int(),
            (ids * 7 % world).int())
    layers = len(mb.blocks)
    every = split_sample_all(*args, world, False, costs, budget, 0, True, True)
    for rank in range(world):
        full = split_sample(*args, world, rank, False, costs, budget, 0, True)
        read = split_sample(*args, world, rank, False, costs, budget, 0, True, True)
        assert all(map(torch.equal, every[rank], read))
        assert read[0].numel() == 0 and full[0].numel() > 0  # loaded rows
        stats, want = read[1].tolist(), full[1].tolist()
        assert stats[world + 3] == 0 and stats[:world + 3] == want[:world + 3]
        assert stats[world + 4:] == want[world + 4:]
        dst, src, ei, gather, send, send_c, recv_c, agg = read[2:10]
        assert all(map(torch.equal, (dst, src, ei), full[2:5]))
        assert gather.numel() == send.numel() == agg.numel() == 0
        assert send_c.tolist() == recv_c.tolist() == [0] * world
        rest = 2 + 8
        assert all(map(torch.equal, read[rest:], full[rest:]))  # later layers, edge positions
        assert len(read) == 2 + 9 * layers
    with pytest.raises(RuntimeError, match="read_in .* excludes preagg"):
        split_sample(*args, world, 0, True, costs, 0, 0, False, True)


@pytest.mark.parametrize("read_inputs", [False, True])
def test_a_plan_round_trips_through_its_wire_format(read_inputs):
    """pack_plan -> unpack_plan keeps every part a rank uses (GCN's float factors bit for
    bit): int32 on the wire while every id fits, int64 when a global id does not."""
    import dataclasses

    from gnnscale.data.synthetic import generate
    from gnnscale.sampling.neighbor import NeighborSampler
    from gnnscale.strategies.split.splitter import pack_plan, split_sample_all, unpack_plan

    graph = generate("tiny", seed=0)
    mb = NeighborSampler([5, 5]).sample(graph, graph.train_idx[:64], 3)
    own = (torch.arange(graph.num_nodes) % 3).int()
    plan = split_sample_all(mb, own, own, 3, gcn_block_norm=True,
                            read_inputs=read_inputs)[1]
    big = 1 << 33  # global ids past int32: the same plan, its ids shifted
    far = dataclasses.replace(
        plan, loaded_ids=plan.loaded_ids + big, target_ids=plan.target_ids + big,
        layers=[dataclasses.replace(lp, block=dataclasses.replace(
            lp.block, src_ids=lp.block.src_ids + big)) for lp in plan.layers])
    for p, dtype in ((plan, torch.int32), (far, torch.int64)):
        buf = pack_plan(p)
        assert buf.dtype == dtype
        back = unpack_plan(buf)
        assert torch.equal(back.loaded_ids, p.loaded_ids)
        assert torch.equal(back.target_ids, p.target_ids)
        assert (back.edges_per_rank, back.local_edges, back.total_edges, back.replicated,
                back.num_targets) == (p.edges_per_rank, p.local_edges, p.total_edges,
                                      p.replicated, p.num_targets)
        for lp, got in zip(p.layers, back.layers):
            for name in ("gather", "send_idx", "agg_row", "agg_slot", "slot_count"):
                assert torch.equal(getattr(got, name), getattr(lp, name)), name
            assert (got.send_counts, got.recv_counts, got.moves) == (
                lp.send_counts, lp.recv_counts, lp.moves)
            assert torch.equal(got.scale.view(torch.int32), lp.scale.view(torch.int32))
            assert torch.equal(got.block.edge_index, lp.block.edge_index)
            assert torch.equal(got.block.src_ids, lp.block.src_ids)
