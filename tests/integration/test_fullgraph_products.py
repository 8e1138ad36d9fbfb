"""The full-graph plans' products: a splittable model's aggregation is one CSR product built
once with its transpose (torch's backward of a CSR product transposes the matrix, a sort, on
every call), on edge-cuts and vertex-cuts, overlapped or not; results equal one process."""

from __future__ import annotations

import pytest
import torch

from gnnscale.deps.depcache import DepCache
from gnnscale.distributed.topology import Topology
from gnnscale.strategies.fullgraph.edge_cut import EdgeCutPlan
from gnnscale.strategies.fullgraph.vertex_cut import VertexCutPlan
from tests import _fullgraph_fns as F
from tests import _vertex_cut_fns as V

#: torch's CSR products whose backward transposes the matrix on every call
TORCH_SPARSE = ("SparseAddmmBackward0", "SparseMmReduceImplBackward0", "SparseMmBackward0")


def _autograd_nodes(t: torch.Tensor) -> set[str]:
    seen, stack = set(), [t.grad_fn]
    while stack:
        f = stack.pop()
        if f is None or f in seen:
            continue
        seen.add(f)
        stack.extend(g for g, _ in f.next_functions)
    return {type(f).__name__ for f in seen}


def _close(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.allclose(x, y, atol=1e-5, rtol=1e-4) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("model_name,cached", [
    ("sage", True), ("gcn", True), ("gin", True), ("gcn_res", True), ("sage_res", True),
    ("gcn", False)])
def test_edge_cut_product_keeps_its_transpose(model_name, cached):
    """One rank (every step without an exchange, as depcache's and world 1's): the plain
    plan's convs run on the cached product, equal to one process over 3 Adam epochs with
    keyed dropout; ``cached=False`` (the conv's own product) stays as a baseline."""
    graph = F.make_graph()
    model = F.make_model(model_name, graph)
    plan = EdgeCutPlan(graph, torch.zeros(graph.num_nodes, dtype=torch.int64), 0, 1,
                       DepCache(), model.widths(graph.num_features), cached=cached)
    res = F._train(graph, model, lambda: plan.forward(model), plan.masters, 1)
    ref = F.reference(model_name)
    assert res["loss"] == pytest.approx(ref["loss"], rel=1e-5)
    assert _close(res["grads"], ref["grads"]) and _close(res["params"], ref["params"])
    nodes = _autograd_nodes(plan.forward(model))
    assert ("FixedProductBackward" in nodes) == cached
    assert not (set(TORCH_SPARSE) & nodes) == cached, nodes


@pytest.mark.parametrize("rows", [1, 7, 64, 200])
def test_column_blocks_sum_to_the_product_and_its_gradient(rows):
    """A CSR product cut by ranges of the input's rows (:func:`column_blocks`, the last range
    shorter) sums to the whole product, and its gradient is the whole transpose's."""
    from gnnscale.models.base import csr_matrix
    from gnnscale.ops.sparse import blocked_mm, column_blocks, fixed_mm

    g = torch.Generator().manual_seed(rows)
    n_src, n_dst, e = 200, 50, 900
    src, dst = torch.randint(0, n_src, (e,), generator=g), torch.randint(0, n_dst, (e,),
                                                                          generator=g)
    w = torch.rand(e, generator=g)
    mat = csr_matrix(src, dst, w, (n_src, n_dst), torch.float64)
    mat_t = csr_matrix(dst, src, w, (n_dst, n_src), torch.float64)
    blocks = column_blocks(mat, rows)
    assert [(a, b) for _, a, b in blocks] == [(a, min(n_src, a + rows))
                                             for a in range(0, n_src, rows)]
    x = torch.rand(n_src, 3, generator=g, dtype=torch.float64, requires_grad=True)
    y = torch.rand(n_dst, 3, generator=g, dtype=torch.float64)
    whole = fixed_mm(mat, mat_t, x)
    (gw,) = torch.autograd.grad((whole * y).sum(), x)
    got = blocked_mm(blocks, mat_t, x)
    (gb,) = torch.autograd.grad((got * y).sum(), x)
    torch.testing.assert_close(got, whole)
    torch.testing.assert_close(gb, gw)


def test_a_product_is_blocked_only_beyond_the_cache_and_with_entries_to_spare(monkeypatch):
    """Blocks of half the cache when the rows do not fit in it, spread evenly; one block when
    they fit, when the blocks would be more than one per 8 entries of an output row, and on
    an accelerator."""
    import gnnscale.ops.sparse as sparse

    monkeypatch.setattr(sparse, "llc_bytes", lambda: 1 << 20)
    cpu = torch.device("cpu")
    assert sparse.block_rows(1000, 64, 4, cpu, 10**6, 100) == 1000  # 256 kB: fits
    # 10 MB of rows, blocks of at most 512 kB (2,048 rows): 20 blocks of 2,000 rows
    assert sparse.block_rows(40_000, 64, 4, cpu, 10**6, 100) == 2000
    assert sparse.block_rows(40_001, 64, 4, cpu, 10**6, 100) == 2001  # 20 blocks, even
    assert sparse.block_rows(40_000, 64, 4, cpu, 20 * 8 * 100 - 1, 100) == 40_000
    assert sparse.block_rows(40_000, 64, 4, torch.device("meta"), 10**6, 100) == 40_000


def test_a_cut_group_drops_its_whole_matrix_and_serves_every_width(monkeypatch):
    """A group sum cut into blocks for one row width keeps only the blocks; a width decided
    whole before the cut, and one that comes after it, are summed from the blocks, equal to
    the whole product."""
    import gnnscale.strategies.fullgraph.overlap as overlap

    g = torch.Generator().manual_seed(0)
    col, dst = torch.randint(0, 40, (150,), generator=g), torch.randint(0, 30, (150,),
                                                                         generator=g)
    w = torch.rand(150, generator=g, dtype=torch.float64)
    dense = torch.zeros(30, 40, dtype=torch.float64).index_put_((dst, col), w, accumulate=True)
    gs = overlap.GroupSum.build(col, dst, w, 40, 30, torch.float64)
    monkeypatch.setattr(overlap, "block_rows", lambda n, width, *_: 7 if width == 4 else n)
    xs = {d: torch.rand(40, d, generator=g, dtype=torch.float64) for d in (2, 4, 3)}
    for d, x in xs.items():  # width 2 whole, 4 cut (the matrix dropped), then 3
        torch.testing.assert_close(gs.first(x), dense @ x)
        assert (gs.matrix is None) == (d != 2)
    torch.testing.assert_close(gs.first(xs[2]), dense @ xs[2])
    assert len(gs.blocks) == 6


@pytest.mark.parametrize("model_name", ["sage", "gcn", "gin"])
def test_edge_cut_product_over_a_table_beyond_the_cache_is_blocked(model_name, monkeypatch):
    """Products run by column blocks (5 source rows a block here) still equal one
    process."""
    import gnnscale.strategies.fullgraph.overlap as overlap

    monkeypatch.setattr(overlap, "block_rows", lambda num_rows, *_: 5)
    graph = F.make_graph()
    model = F.make_model(model_name, graph)
    plan = EdgeCutPlan(graph, torch.zeros(graph.num_nodes, dtype=torch.int64), 0, 1,
                       DepCache(), model.widths(graph.num_features))
    res = F._train(graph, model, lambda: plan.forward(model), plan.masters, 1)
    ref = F.reference(model_name)
    assert res["loss"] == pytest.approx(ref["loss"], rel=1e-5)
    assert _close(res["grads"], ref["grads"]) and _close(res["params"], ref["params"])
    assert "BlockedProductBackward" in _autograd_nodes(plan.forward(model))


@pytest.mark.parametrize("model_name", ["sage", "gcn", "gin", "gcn_res"])
def test_vertex_cut_product_keeps_its_transpose(model_name):
    """A one-part vertex-cut (the plain, non-overlapped path): the aggregation is the cached
    product, and the loss and gradients equal one process."""
    graph = V.tiny_graph()
    book = V.PARTITIONERS["cvc"](masters="blocked").partition(graph, 1)
    model = V.make_model(model_name, "auto", graph)
    plan = VertexCutPlan(graph, book, model, Topology(0, 1, 0, 1, torch.device("cpu")))
    out = plan.forward(model)
    loss = V._loss(out, plan.masters, graph)
    loss.backward()
    ref = V.reference(model_name, "auto")
    assert loss.item() == pytest.approx(ref["loss"], rel=1e-5)
    assert _close([p.grad for p in model.parameters()], ref["grads"])
    nodes = _autograd_nodes(out)
    assert "FixedProductBackward" in nodes and not set(TORCH_SPARSE) & nodes, nodes
