"""The link decoder's fused pair product (``csrc/pairs/``) and the faster pair lookups against
the formulations they replace: the same logits, losses and gradients bit for bit, the same
negatives, the same row locations."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gnnscale.data.graph import GraphStore
from gnnscale.ops.pairs import pair_product, pair_product_backward
from gnnscale.ops.sampling import edge_key_table, negative_sample
from gnnscale.tasks.link import LinkTask, negatives
from gnnscale.tasks.link.decoders import _PairProduct
from gnnscale.tasks.link.negatives import draw, exclusion, sorted_csc
from gnnscale.tasks.link.pairs import RowLocator, pair_index, pair_rows
from tests.tasks.test_link_task import ring_graph


def _pairs(n: int, p: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, n, (p,), generator=g), torch.randint(0, n, (p,), generator=g)
    if p > 4:
        dst[:3] = src[:3]  # self pairs: a row is both ends of one pair
    return src, dst


@pytest.fixture
def one_thread():
    """One intra-op thread, as every rank of the suites runs: torch's own scatter (the old
    formulation's backward) sums in pair order only there; on more threads its order, and so
    its last bits, follow the thread count (the fused backward's do not)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _reference(rows: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, reduce: bool,
               grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The old formulation and its autograd: ``(rows[src] * rows[dst])[.sum(-1)]``."""
    r = rows.detach().requires_grad_(True)
    out = r[src] * r[dst]
    out = out.sum(-1) if reduce else out
    out.backward(grad)
    return out.detach(), r.grad


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reduce", [True, False])
@pytest.mark.parametrize("n,p,d", [(1, 1, 1), (40, 1500, 64), (300, 5000, 7), (9, 0, 3)])
def test_pair_product_matches_torch_bit_for_bit(dtype, reduce, n, p, d, one_thread):
    g = torch.Generator().manual_seed(n + p + d)
    rows = torch.randn(n, d, generator=g, dtype=dtype)
    src, dst = _pairs(n, p, d)
    grad = torch.randn((p,) if reduce else (p, d), generator=g, dtype=dtype)
    want, want_grad = _reference(rows, src, dst, reduce, grad)
    r = rows.clone().requires_grad_(True)
    got = _PairProduct.apply(r, src, dst, reduce)
    got.backward(grad)
    assert torch.equal(got, want) and torch.equal(r.grad, want_grad)
    for threads in (1, 2):  # the backward's threads change nothing
        assert torch.equal(pair_product_backward(grad, rows, src, dst, threads), want_grad)
    # the dot's gradient as the sum's backward hands it on (expanded to [P, D]): the same
    if reduce:
        wide = grad[:, None].expand(p, d)
        assert torch.equal(pair_product_backward(wide, rows, src, dst), want_grad)
    torch.set_num_threads(2)  # torch's scatter on 2 threads: another sum order, close
    assert torch.allclose(_reference(rows, src, dst, reduce, grad)[1], want_grad,
                          rtol=1e-5, atol=1e-5)


def test_pair_product_gradcheck():
    rows = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    src, dst = torch.tensor([0, 2, 5, 2, 1]), torch.tensor([1, 2, 0, 4, 1])
    for reduce in (True, False):
        assert torch.autograd.gradcheck(lambda r, reduce=reduce: _PairProduct.apply(
            r, src, dst, reduce), (rows,))


def test_pair_product_refuses_bad_input():
    rows = torch.randn(4, 2)
    with pytest.raises(RuntimeError, match="rows has 4 rows"):
        pair_product(rows, torch.tensor([0, 4]), torch.tensor([1, 1]), True)
    with pytest.raises(RuntimeError, match="int64"):
        pair_product(rows, torch.tensor([0], dtype=torch.int32), torch.tensor([1]), True)
    with pytest.raises(RuntimeError, match="float32 or float64"):
        pair_product(rows.half(), torch.tensor([0]), torch.tensor([1]), True)
    with pytest.raises(RuntimeError, match="grad must be"):
        pair_product_backward(torch.randn(3), rows, torch.tensor([0]), torch.tensor([1]))


@pytest.mark.parametrize("decoder", ["dot", "mlp"])
def test_link_loss_and_gradients_are_the_old_bits(decoder, one_thread):
    """task.loss (fused) against the loss as it was: the head on gathered rows."""
    task = LinkTask(num_negatives=3, decoder=decoder, dim=16, decoder_hidden=8)
    task.prepare(ring_graph(), None, seed=0)
    torch.manual_seed(0)
    model = torch.nn.Module()
    task.attach(model)
    items = torch.arange(40)
    target = task.target(items, 2)
    rows = torch.randn(task.seeds(items, 2).numel(), 16)

    def run(fused: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
        r = rows.clone().requires_grad_(True)
        if fused:
            loss = task.loss(r, target)
        else:
            logits = task.head(r[target.index[0]], r[target.index[1]])
            loss = F.binary_cross_entropy_with_logits(logits, target.label)
        params = [r, *task.head.parameters()]
        grads = torch.autograd.grad(loss, params)
        return loss.detach(), list(grads)

    (loss, grads), (want, want_grads) = run(True), run(False)
    assert torch.equal(loss, want)
    assert all(torch.equal(a, b) for a, b in zip(grads, want_grads))


def test_sharded_loss_on_one_rank_is_the_old_bits(one_thread):
    task = LinkTask(num_negatives=2, dim=8)
    g = task.prepare(ring_graph(), None, seed=0)
    task.attach(torch.nn.Module())
    items = torch.arange(50)
    row_ids = torch.randperm(g.num_nodes, generator=torch.Generator().manual_seed(3))
    rows = torch.randn(g.num_nodes, 8, requires_grad=True)
    got = task.sharded_loss(rows, row_ids, items, 1)
    (grad,) = torch.autograd.grad(got, rows)
    src, dst, label = task.pairs(items, 1)
    zu, zv, _ = pair_rows(rows, RowLocator.build(row_ids), src, dst, g.num_nodes)
    want = F.binary_cross_entropy_with_logits((zu * zv).sum(-1), label,
                                              reduction="sum") / src.numel()
    (want_grad,) = torch.autograd.grad(want, rows)
    assert torch.equal(got.detach(), want.detach()) and torch.equal(grad, want_grad)


def test_dense_locator_finds_what_the_search_finds():
    g = torch.Generator().manual_seed(0)
    ids = torch.randperm(100, generator=g)[:90]  # dense: a table
    dense = RowLocator.build(ids)
    assert dense.slot is not None
    search = RowLocator(dense.sorted_ids, dense.holder, dense.position, 1, 0)  # no table
    v = ids[torch.randint(0, 90, (500,), generator=g)]
    assert all(torch.equal(a, b) for a, b in zip(dense.find(v), search.find(v)))
    missing = int(torch.tensor(sorted(set(range(100)) - set(ids.tolist())))[0])
    for locator in (dense, search):
        for bad in (missing, 100, -1):
            with pytest.raises(ValueError, match=f"endpoint {bad} "):
                locator.find(torch.tensor([int(ids[0]), bad]))
    sparse = RowLocator.build(torch.tensor([5, 1000, 7]))  # far apart: the search
    assert sparse.slot is None and sparse.find(torch.tensor([1000]))[1].tolist() == [1]
    table, a, b, mine = pair_index(torch.randn(90, 2), dense, v[:10], v[10:20], 100)
    assert torch.equal(a, dense.find(v[:10])[1]) and torch.equal(b, dense.find(v[10:20])[1])


def test_pairs_are_drawn_once_and_seeds_only_when_asked():
    task = LinkTask(num_negatives=2, dim=4)
    task.prepare(ring_graph(), None, seed=0)
    items = torch.tensor([4, 9, 1])
    src, dst, label = task.pairs(items, 0)
    assert task._drawn(items, 0, seeds=False)[3] is None  # pairs alone sort no endpoints
    seeds = task.seeds(items, 0)
    assert torch.equal(seeds, torch.unique(torch.cat([src, dst])))
    again = task.pairs(items, 0)
    assert all(a is b for a, b in zip(again, (src, dst, label)))  # the memo, not a new draw
    fresh = LinkTask(num_negatives=2, dim=4)
    fresh.prepare(ring_graph(), None, seed=0)
    assert torch.equal(fresh.seeds(items, 0), seeds)
    assert all(torch.equal(a, b) for a, b in zip(fresh.pairs(items, 0), (src, dst, label)))


@pytest.mark.parametrize("kind", ["uniform", "per_source"])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_hashed_edge_test_draws_the_same_negatives(kind, index_dtype, monkeypatch):
    g = torch.Generator().manual_seed(4)
    n = 40  # dense (about a third of all pairs are edges): many draws are rejected
    ei = torch.randint(0, n, (2, 700), generator=g)
    graph = GraphStore.from_edge_index(torch.cat([ei, ei[:, :50]], 1), n)  # repeated edges
    indptr, indices = sorted_csc(graph.indptr, graph.indices.to(index_dtype))
    table = edge_key_table(indptr, indices)
    edges = set((graph.edge_index()[1] * n + graph.edge_index()[0]).tolist())
    assert set(table[table >= 0].tolist()) == edges and table.numel() >= 2 * indices.numel()
    src = torch.randint(0, n, (300,), generator=g)
    keys = torch.arange(300)
    searched = draw(n, src, keys, 3, kind, 11, indptr, indices)
    hashed = draw(n, src, keys, 3, kind, 11, indptr, indices, table)
    assert torch.equal(searched[0], hashed[0]) and torch.equal(searched[1], hashed[1])
    got = set((hashed[1] * n + hashed[0]).tolist())
    assert not (got & edges) and not bool((hashed[0] == hashed[1]).any())
    built = exclusion(graph.indptr, graph.indices.to(index_dtype))
    assert torch.equal(built[2], table)
    monkeypatch.setattr(negatives, "TABLE_BYTES", 8)  # too big to hash: the search
    assert exclusion(graph.indptr, graph.indices)[2] is None


def test_edge_table_refuses_bad_input():
    with pytest.raises(RuntimeError, match="power of"):
        negative_sample(4, torch.arange(3), 1, seed=0, indptr=torch.tensor([0, 0, 0, 0, 0]),
                        indices=torch.empty(0, dtype=torch.int64),
                        edge_table=torch.full((3,), -1))
