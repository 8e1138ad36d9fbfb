"""gnnscale.ops.sample_neighbors on its own: exact output on a hand-made graph, modes, checks."""

import pytest
import torch

from gnnscale.ops.sampling import sample_neighbors

# CSC: in-neighbours of 0 are [1, 2], of 1 [2], of 2 [3], of 3 none
INDPTR = torch.tensor([0, 2, 3, 4, 4])
INDICES = torch.tensor([1, 2, 2, 3])


def test_full_fanout_gives_the_exact_sample():
    n_id, counts, edges = sample_neighbors(INDPTR, INDICES, None, torch.tensor([0]), [-1, -1],
                                           False, 0)
    assert n_id.tolist() == [0, 1, 2, 3] and counts.tolist() == [1, 3, 4]
    assert edges[0].tolist() == [[1, 2], [0, 0]]
    assert edges[1].tolist() == [[1, 2, 2, 3], [0, 0, 1, 2]]
    n_id32, _, edges32 = sample_neighbors(INDPTR, INDICES.int(), None, torch.tensor([0]),
                                          [-1, -1], False, 0)
    assert torch.equal(n_id32, n_id) and all(map(torch.equal, edges32, edges))


def test_fanouts_replacement_and_weights():
    seeds = torch.tensor([0, 3])
    _, counts, edges = sample_neighbors(INDPTR, INDICES, None, seeds, [0], False, 0)
    assert counts.tolist() == [2, 2] and edges[0].shape == (2, 0)
    _, _, edges = sample_neighbors(INDPTR, INDICES, None, seeds, [5], True, 0)
    assert edges[0][1].tolist() == [0] * 5     # with replacement: 5 draws; vertex 3 has none
    weights = torch.tensor([0.0, 1.0, 1.0, 1.0])  # edge 1 -> 0 can never be drawn
    for s in range(20):
        n_id, _, edges = sample_neighbors(INDPTR, INDICES, weights, torch.tensor([0]), [1],
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
