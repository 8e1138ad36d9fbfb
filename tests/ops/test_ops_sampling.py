"""gnnscale.ops.sample_neighbors on its own: exact output on a hand-made graph, modes, checks."""

import pytest
import torch

from gnnscale.ops.sampling import sample_neighbors

# CSC: in-neighbours of 0 are [1, 2], of 1 [2], of 2 [3], of 3 none
INDPTR = torch.tensor([0, 2, 3, 4, 4])
INDICES = torch.tensor([1, 2, 2, 3])


def test_full_fanout_gives_the_exact_sample():
    n_id, counts, edges, e_ids = sample_neighbors(INDPTR, INDICES, None, torch.tensor([0]),
                                                  [-1, -1], False, 0)
    assert n_id.tolist() == [0, 1, 2, 3] and counts.tolist() == [1, 3, 4]
    assert edges[0].tolist() == [[1, 2], [0, 0]]
    assert edges[1].tolist() == [[1, 2, 2, 3], [0, 0, 1, 2]]
    assert e_ids is None
    n_id32, _, edges32, e_ids = sample_neighbors(INDPTR, INDICES.int(), None, torch.tensor([0]),
                                                 [-1, -1], False, 0, edge_ids=True)
    assert torch.equal(n_id32, n_id) and all(map(torch.equal, edges32, edges))
    assert [e.tolist() for e in e_ids] == [[0, 1], [0, 1, 2, 3]]  # every in-edge, CSC order


def test_fanouts_replacement_and_weights():
    seeds = torch.tensor([0, 3])
    _, counts, edges, e_ids = sample_neighbors(INDPTR, INDICES, None, seeds, [0], False, 0,
                                               edge_ids=True)
    assert counts.tolist() == [2, 2] and edges[0].shape == (2, 0) and e_ids[0].shape == (0,)
    _, _, edges, _ = sample_neighbors(INDPTR, INDICES, None, seeds, [5], True, 0)
    assert edges[0][1].tolist() == [0] * 5     # with replacement: 5 draws; vertex 3 has none
    weights = torch.tensor([0.0, 1.0, 1.0, 1.0])  # edge 1 -> 0 can never be drawn
    for s in range(20):
        n_id, _, edges, _ = sample_neighbors(INDPTR, INDICES, weights, torch.tensor([0]), [1],
                                             s % 2 == 1, s)
        assert n_id[edges[0][0]].tolist() == [2]


def test_same_seed_same_sample_other_seed_differs():
    g = torch.Generator().manual_seed(0)
    n = 3000
    indptr = torch.arange(0, 20 * n + 1, 20)
    indices = torch.randint(0, n, (20 * n,), generator=g)
    seeds = torch.arange(0, n, 11)
    a = sample_neighbors(indptr, indices, None, seeds, [5, 3], False, 7)
    b = sample_neighbors(indptr, indices, None, seeds, [5, 3], False, 7)
    c = sample_neighbors(indptr, indices, None, seeds, [5, 3], False, 8)
    assert torch.equal(a[0], b[0]) and all(map(torch.equal, a[2], b[2]))
    assert not torch.equal(a[2][0], c[2][0])


@pytest.mark.parametrize("replace,weighted", [(False, False), (True, False), (False, True)])
def test_edge_ids_name_the_sampled_edges(replace, weighted):
    """Each sampled edge's id is its CSC position: ``indices[e_id]`` is its global source and
    ``e_id`` lies in its destination's ``indptr`` range; asking changes nothing else."""
    g = torch.Generator().manual_seed(2)
    n = 500
    deg = torch.randint(0, 12, (n,), generator=g)
    indptr = torch.cat([torch.zeros(1, dtype=torch.long), deg.cumsum(0)])
    indices = torch.randint(0, n, (int(indptr[-1]),), generator=g)
    weights = torch.rand(indices.numel(), generator=g) if weighted else None
    seeds = torch.randperm(n, generator=g)[:40]
    plain = sample_neighbors(indptr, indices, weights, seeds, [6, 4, -1], replace, 5, 2)
    n_id, counts, edges, e_ids = sample_neighbors(indptr, indices, weights, seeds, [6, 4, -1],
                                                  replace, 5, 2, edge_ids=True)
    assert torch.equal(n_id, plain[0]) and torch.equal(counts, plain[1])
    assert all(map(torch.equal, edges, plain[2])) and plain[3] is None
    for e, eid in zip(edges, e_ids):
        assert eid.dtype == torch.int64 and eid.shape == (e.shape[1],)
        assert torch.equal(indices[eid], n_id[e[0]])
        dst = n_id[e[1]]
        assert bool(((indptr[dst] <= eid) & (eid < indptr[dst + 1])).all())
    if not replace:  # without replacement a destination never draws one edge twice
        assert all(eid.unique().numel() == eid.numel() for eid in e_ids)


def test_sample_neighbors_checks_its_inputs():
    with pytest.raises(RuntimeError, match="indptr must be int64"):
        sample_neighbors(INDPTR.int(), INDICES, None, torch.tensor([0]), [1], False, 0)
    with pytest.raises(RuntimeError, match="fanouts must be -1"):
        sample_neighbors(INDPTR, INDICES, None, torch.tensor([0]), [-2], False, 0)
    with pytest.raises(RuntimeError, match="1-D CPU tensors"):
        sample_neighbors(INDPTR, INDICES.view(2, 2), None, torch.tensor([0]), [1], False, 0)
    with pytest.raises(RuntimeError, match="outside"):
        sample_neighbors(INDPTR, torch.tensor([1, 2, 2, 9]), None, torch.tensor([0]), [-1, -1],
                         False, 0)


@pytest.mark.parametrize("replace,weighted", [(False, False), (True, True)])
def test_any_thread_count_gives_the_same_sample(replace, weighted):
    """Many chunks per phase (over 256 destinations, 16k edges), helpers beyond the cores."""
    g = torch.Generator().manual_seed(1)
    n, deg = 6000, 30
    indptr = torch.arange(0, deg * n + 1, deg)
    indices = torch.randint(0, n, (deg * n,), generator=g)
    weights = torch.rand(deg * n, generator=g) if weighted else None
    seeds = torch.randperm(n, generator=g)[:900]
    ref = sample_neighbors(indptr, indices, weights, seeds, [10, 5, 3], replace, 3, 1,
                           edge_ids=True)
    assert ref[2][-1].shape[1] > 16_384  # more than one chunk of edges
    for threads in (2, 3, 8):
        got = sample_neighbors(indptr, indices, weights, seeds, [10, 5, 3], replace, 3, threads,
                               edge_ids=threads != 3)
        assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
        assert all(map(torch.equal, got[2], ref[2]))
        assert got[3] is None if threads == 3 else all(map(torch.equal, got[3], ref[3]))
    # the relabel keeps first-appearance order: each hop's new ids appear in edge order
    n_id, counts, edges = ref[0], ref[1].tolist(), ref[2]
    for h, e in enumerate(edges):
        order = dict.fromkeys(u for u in e[0].tolist() if u >= counts[h])  # first appearances
        assert list(order) == list(range(counts[h], counts[h + 1]))
        assert torch.equal(n_id[counts[h]:counts[h + 1]].unique().sort().values,
                           n_id[counts[h]:counts[h + 1]].sort().values)


def test_errors_raised_on_helper_threads_reach_the_caller():
    n = 4000
    indptr = torch.arange(0, 8 * n + 1, 8)
    indices = torch.randint(0, n, (8 * n,), generator=torch.Generator().manual_seed(0))
    indices[-1] = n + 5
    for threads in (1, 4):
        with pytest.raises(RuntimeError, match="outside"):
            sample_neighbors(indptr, indices, None, torch.arange(n), [8], False, 0, threads)
