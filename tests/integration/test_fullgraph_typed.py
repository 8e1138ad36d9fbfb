"""strategy=fullgraph on a typed graph (R-GCN: per-type widths, a featureless type's sparse
embedding table) and with edge features (GAT's edge_dim, GINE), on 2 and 4 real gloo ranks
against one process training on the whole graph; and what the launcher accepts and refuses."""

from __future__ import annotations

import pytest
import torch

from tests import _fullgraph_typed_fns as T
from tests import _typed_fns, _typed_ranks

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny graphs: see conftest


def _close(got: list[torch.Tensor], want: list[torch.Tensor], what: tuple) -> None:
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=lambda m: f"{what}: {m}")


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 4])
def test_typed_and_edge_feature_fullgraph_match_one_process(world):
    """The cases of ``_typed_ranks.FULLGRAPH`` on 2 ranks; on 4 R-GCN on an edge cut (depcomm)
    and on the vertex cut, and R-GAT: every epoch's loss and gradients and the final
    parameters equal one process's."""
    cases = _typed_ranks.PLANS[world]["fullgraph"]
    ranks = [r["fullgraph"] for r in _typed_ranks.runs(world)]
    refs = {m: _typed_ranks.reference(T.reference, m) for m in {c[0] for c in cases}}
    for i, case in enumerate(cases):
        ref = refs[case[0]]
        for rank in ranks:
            res = rank[i]
            assert res["losses"] == pytest.approx(ref["losses"], rel=1e-5), case
            for epoch in range(T.EPOCHS):
                _close(res["grads"][epoch], ref["grads"][epoch], (*case, "grads", epoch))
            _close(res["params"], ref["params"], (*case, "params"))
        metrics = [rank[i]["metrics"] for rank in ranks]
        if case[0] == "rgcn":
            graph = T.make_typed_graph()
            featureless = graph.num_nodes_of("field")
            assert all(m["embedding_rows_held"] == featureless for m in metrics)
            touched = [m["embedding_rows_touched"] for m in metrics]
            if case[1] == "depcomm" and not case[2]:  # each rank looks up its own rows: a split
                lo = int(graph.node_type_offset[graph.node_types.index("field")])
                part = _typed_fns.skew_types(graph, T.part_of(graph, world), world)
                own = part[lo:lo + featureless]
                assert touched == [int((own == r).sum()) for r in range(world)]
                assert (0 in touched) == (world == 4)  # on 4 ranks, some own none of the type
            else:
                assert all(0 < t <= featureless for t in touched)
            if case[1] != "depcache":  # encoded layer-0 rows and their gradients travel
                assert all(m["bytes_forward"] > 0 and m["bytes_backward"] > 0 for m in metrics)
        elif case[0] != "rgat":
            graph = T.make_edge_graph()
            row = graph.edge_attr.shape[1] * graph.edge_attr.element_size()
            held = sum(m["bytes_edge_features"] for m in metrics)
            assert held >= graph.num_edges * 2 * row  # every edge's row, on each layer
            assert held % row == 0


def _check(tmp_path, *overrides: str) -> None:
    """The launcher's strategy checks on the tiny typed graph's metadata (no dataset read)."""
    from gnnscale.data.metadata import DatasetMeta
    from gnnscale.strategies.config import Checked, declared
    from tests._train import make_cfg

    cfg = make_cfg(tmp_path, "model=rgcn", "strategy=fullgraph", "model.num_layers=2",
                   "dist.world_size=2", *overrides)
    cls, built = declared(cfg.strategy), Checked.build(cfg, DatasetMeta.of(T.make_typed_graph()))
    cls.check_config(cfg, built)
    cls.check_data(cfg, built)


def test_the_launcher_takes_a_typed_graph_on_edge_and_vertex_cuts(tmp_path):
    _check(tmp_path, "deps=depcomm")
    _check(tmp_path, "partitioner=cvc")  # R-GCN splits into per-relation sums and update


def test_only_the_base_row_sum_takes_the_cached_products():
    """The cached and overlapped products compute the base weighted sum of source rows; a
    model that aggregates its own way (a typed sum per relation, say) or reads edge features
    runs its own aggregate or conv instead."""
    from gnnscale.models.sage import SAGE
    from gnnscale.strategies.fullgraph.plan import sums_rows

    class OwnSum(SAGE):
        def edge_sum(self, layer, x, block):
            src, dst = block.edge_index
            return x.new_zeros(block.num_dst, x.shape[1]).index_add_(0, dst, x[src])

    graph = T.make_edge_graph()
    assert sums_rows(SAGE(4, 2, hidden=8, num_layers=2))
    assert not sums_rows(OwnSum(4, 2, hidden=8, num_layers=2))
    assert not sums_rows(T.make_edge_model(graph))
