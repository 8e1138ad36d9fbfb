"""The torch-only ``split_sample`` / ``split_sample_all`` (gnnscale/ops/_torch_split.py) against
the native kernel: the same tensors, bit for bit, on random samples and sampler mini-batches
for every flag combination (preagg, edge_pos, read_in, budget 0 or not, with and without the
fixed exchange cost), world sizes 2 to 4, empty blocks and layers; and gnnscale.ops.split's
choice of it under GNNSCALE_NATIVE=0."""

from __future__ import annotations

import itertools

import pytest
import torch

from gnnscale.ops import _loader
from gnnscale.ops import _torch_split as ref

needs_native = pytest.mark.skipif(not _loader.available(), reason="native extension not loaded")

FLAGS = [(p, e, r) for p, e, r in itertools.product([False, True], repeat=3) if not (p and r)]


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    assert len(a) == len(b)
    for j, (x, y) in enumerate(zip(a, b)):
        assert x.dtype == y.dtype and x.shape == y.shape, (j, x.dtype, y.dtype, x.shape, y.shape)
        assert torch.equal(x, y), (j, x, y)


def _random_sample(g: torch.Generator, layers: int, world: int, empty: bool):
    """Counts (targets first), blocks (input first) and owners of a random sample with
    cumulative ids: some blocks sorted by destination (as a sampler's), some not, some empty."""
    n = [int(torch.randint(1, 8, (1,), generator=g))]  # targets
    for _ in range(layers):
        n.append(n[-1] + int(torch.randint(0, 12, (1,), generator=g)))
    n_in_order = n[::-1]  # layer 0 (inputs) first
    edges = []
    for i in range(layers):
        n_lo, n_hi = n_in_order[i], n_in_order[i + 1]
        ne = 0 if empty and i == layers // 2 else int(torch.randint(0, 4 * n_hi + 1, (1,),
                                                                    generator=g))
        src = torch.randint(0, n_lo, (ne,), generator=g)
        dst = torch.randint(0, n_hi, (ne,), generator=g)
        if torch.rand(1, generator=g).item() < 0.6:
            order = torch.sort(dst, stable=True).indices
            src, dst = src[order], dst[order]
        edges.append(torch.stack([src, dst]))
    n0 = n_in_order[0]
    own_part = torch.randint(0, world, (n0 + 3,), generator=g, dtype=torch.int32)
    own_in = own_part if torch.rand(1, generator=g).item() < 0.3 else \
        torch.randint(0, world, (n0,), generator=g, dtype=torch.int32)
    return torch.tensor(n), edges, own_in, own_part


def _costs(g: torch.Generator, layers: int, sync: bool) -> torch.Tensor:
    """Costs that make some rows worth replicating and others not (small integers and halves,
    so sums tie; random doubles, so they do not)."""
    m = 3 * (layers + 1)
    if torch.rand(1, generator=g).item() < 0.5:
        c = torch.randint(0, 5, (m,), generator=g).double() / 2
        c[: layers + 1] += 2.0  # rows cost more to ship than to recompute, sometimes
    else:
        c = torch.rand(m, generator=g, dtype=torch.float64)
        c[: layers + 1] *= 6.0
    if sync:
        c = torch.cat([c, torch.rand(1, generator=g, dtype=torch.float64) * 20])
    return c


def _compare(counts, edges, own_in, own_part, world, preagg, costs, budget, edge_pos,
             read_in) -> None:
    nat = torch.ops.gnnscale
    want_all = nat.split_sample_all(counts, edges, own_in, own_part, world, preagg, costs,
                                    budget, 0, edge_pos, read_in)
    _same(ref.split_sample_all(counts, edges, own_in, own_part, world, preagg, costs, budget,
                               0, edge_pos, read_in), want_all)
    per = len(want_all) // world
    for r in range(world):
        threads = 1 + r % 3  # any thread count: one plan
        want = nat.split_sample(counts, edges, own_in, own_part, world, r, preagg, costs,
                                budget, threads, edge_pos, read_in)
        _same(want, want_all[r * per:(r + 1) * per])
        _same(ref.split_sample(counts, edges, own_in, own_part, world, r, preagg, costs, budget,
                               threads, edge_pos, read_in), want)


@needs_native
@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize("layers", [1, 2, 3])
def test_random_samples_equal_native(world, layers):
    g = torch.Generator().manual_seed(100 * world + layers)
    for trial in range(6):
        sample = _random_sample(g, layers, world, empty=trial % 3 == 2)
        for sync in (False, True):
            costs = _costs(g, layers, sync)
            for budget in (0, 1, 3, 1 << 40):
                for preagg, edge_pos, read_in in FLAGS:
                    _compare(*sample, world, preagg, costs, budget, edge_pos, read_in)


@needs_native
def test_degenerate_samples_equal_native():
    """No edges at all, a single vertex per layer, and a block whose destinations are unsorted."""
    costs = torch.tensor([3.0, 3.0, 3.0, 0.5, 0.5, 0.5, 0.1, 0.1, 0.1, 1.0], dtype=torch.float64)
    owners = torch.tensor([1, 0, 1, 0, 1, 0], dtype=torch.int32)
    cases = [
        (torch.tensor([1, 1, 1]), [torch.zeros(2, 0, dtype=torch.long)] * 2),
        (torch.tensor([2, 4, 6]), [torch.zeros(2, 0, dtype=torch.long)] * 2),
        (torch.tensor([2, 3, 6]), [torch.tensor([[5, 4, 2, 0, 1], [2, 0, 1, 2, 0]]),
                                   torch.tensor([[2, 1, 0], [1, 0, 1]])]),
    ]
    for counts, edges in cases:
        for budget in (0, 2, 100):
            for c in (costs, costs[:9]):
                for preagg, edge_pos, read_in in FLAGS:
                    _compare(counts, edges, owners, owners, 2, preagg, c, budget, edge_pos,
                             read_in)


@needs_native
@pytest.mark.parametrize("world", [2, 3, 4])
def test_sampler_minibatches_equal_native(world):
    """Real mini-batches of the neighbour sampler, with the costs the hybrid planner gives."""
    from gnnscale.deps.hybrid import Hybrid
    from gnnscale.sampling.neighbor import NeighborSampler
    from gnnscale.strategies.split.splitter import _native_args, sample_counts
    from tests._data_fns import make_graph
    from tests._split_fns import scattered_part

    graph = make_graph()
    part = scattered_part(graph.num_nodes, world).int()
    cache = torch.randint(0, world, (graph.num_nodes,), generator=torch.Generator()
                          .manual_seed(world), dtype=torch.int32)
    dims = [graph.num_features, 16, 16, graph.num_classes]
    for fanouts, seed in (([4, 3], 0), ([5, 3, 2], 1), ([-1], 2)):
        mb = NeighborSampler(fanouts).sample(graph, graph.train_idx[:32], seed)
        nl = len(fanouts)
        for own_in in (part, cache):
            counts, edges, o_in, o_part = _native_args(mb, own_in, part)
            assert torch.equal(counts, sample_counts(mb))
            deps = Hybrid(costs={"t_vertex": 1e-4, "t_edge": 1e-5, "t_comm": 1e-3,
                                 "t_sync": 1e-3})
            deps.prepare()
            # the planner's costs, and costs under which rows get replicated (per row, and with
            # t_sync = 2, whole layers at 2 ranks)
            replicating = [0.3] * (nl + 1) + [0.01] * (nl + 1) + [0.05] * (nl + 1)
            for costs in (deps.replication_costs(dims[: nl + 1]),
                          torch.tensor(replicating, dtype=torch.float64),
                          torch.tensor(replicating + [2.0], dtype=torch.float64)):
                for budget in (0, 5, 1 << 40):
                    for preagg, edge_pos, read_in in FLAGS:
                        _compare(counts, edges, o_in, o_part, world, preagg, costs, budget,
                                 edge_pos, read_in)


def test_checks_raise_the_kernels_messages():
    counts, edges = torch.tensor([2, 4]), [torch.tensor([[2, 3, 1, 3], [0, 0, 0, 1]])]
    own = torch.tensor([0, 1, 0, 1], dtype=torch.int32)
    costs = torch.zeros(6, dtype=torch.float64)
    bad = {"bad rank/world": dict(rank=2), "excludes preagg": dict(preagg=True, read_in=True),
           "owner out of": dict(own_in=own * 3), "owners too short": dict(own_in=own[:2]),
           "costs must hold": dict(costs=torch.zeros(5)),
           "one entry per layer": dict(counts=torch.tensor([2]))}
    for msg, kw in bad.items():
        args = dict(counts=counts, edges=edges, own_in=own, own_part=own, world=2, rank=0,
                    preagg=False, costs=costs, budget=0, read_in=False)
        args.update(kw)
        with pytest.raises(RuntimeError, match=msg):
            ref.split_sample(**args)
        if _loader.available():
            with pytest.raises(RuntimeError, match=msg):
                torch.ops.gnnscale.split_sample(**args)


def test_split_module_takes_the_torch_only_path_without_the_extension(monkeypatch):
    """gnnscale.ops.split answers from _torch_split when the loader falls back to _torch."""
    from gnnscale.ops import _torch, split

    monkeypatch.setattr(split, "native", lambda: _torch)
    counts, edges = torch.tensor([2, 4]), [torch.tensor([[2, 3, 1, 3], [0, 0, 0, 1]])]
    own = torch.tensor([0, 1, 0, 1], dtype=torch.int32)
    out = split.split_sample_all(counts, edges, own, own, 2, False, torch.zeros(6), 0)
    flat = ref.split_sample_all(counts, edges, own, own, 2, False, torch.zeros(6), 0, 0,
                                False, False)
    assert len(out) == 2 and len(out[0]) == len(flat) // 2
    for got, want in zip(out[0] + out[1], flat):
        assert torch.equal(got, want)
