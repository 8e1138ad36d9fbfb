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
