"""Vertex-cut full-graph plan (master/mirror sync) equals single-process full-graph training."""

import pytest
import torch

from gnnscale.distributed import spawn
from gnnscale.distributed.launch import Topology
from gnnscale.models.gat import GAT
from gnnscale.models.sage import SAGE
from gnnscale.partition.cvc import grid_shape
from gnnscale.partition.metis import MetisPartitioner
from gnnscale.partition.oec import OecPartitioner
from gnnscale.strategies.fullgraph.vertex_cut import VertexCutPlan
from tests import _vertex_cut_fns as fns

CASES = [(p, "blocked", m, "auto") for p in ("iec", "oec", "cvc", "hvc")
         for m in ("sage", "gcn", "gin")] + [
    ("cvc", "blocked", "sage", "true"), ("oec", "blocked", "gcn", "true"),
    ("iec", "blocked", "gin", "true"), ("hvc", "blocked", "sage_sum", "true"),
    ("cvc", "metis", "gcn", "auto"), ("oec", "random", "gin", "true"),
    ("cvc", "blocked+ring", "sage", "auto"), ("hvc", "metis+ring", "gcn", "true"),
    ("cvc", "blocked", "gcn_res", "auto"), ("hvc", "metis+ring", "sage_res", "false"),
    ("oec", "blocked", "sage_res", "auto"),
    # both syncs overlapped with the local aggregation (forward and backward)
    ("iec", "blocked+overlap", "gcn", "false"), ("oec", "blocked+overlap", "gin", "auto"),
    ("cvc", "blocked+overlap", "sage", "auto"), ("cvc", "metis+overlap", "gin", "true"),
    ("hvc", "metis+overlap", "gcn", "true"), ("hvc", "blocked+ring+overlap", "sage_sum", "true"),
    ("cvc", "blocked+ring+overlap", "gcn_res", "auto"), ("hvc", "blocked+overlap", "sage_res",
                                                           "false"),
    ("cvc", "metis+overlap+wait", "gcn", "true"),  # the same computation, nothing hidden
]


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 4])
def test_vertex_cut_matches_single_process(world):
    ranks = spawn(fns.vertex_cut_cases, world, CASES)
    refs = {}
    for k, (part, _, model, reorder) in enumerate(CASES):
        ref = refs.setdefault((model, reorder), fns.reference(model, reorder))
        got = [ranks[r][k] for r in range(world)]
        for r in range(world):
            assert got[r]["loss"] == pytest.approx(ref["loss"], rel=1e-5), (CASES[k], r)
            for a, b in zip(got[r]["grads"], ref["grads"], strict=True):
                torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
        stats = [g["stats"] for g in got]
        # every edge aggregated exactly once per layer over all ranks; every master once
        assert sum(s["edges_computed"] for s in stats) == ref["edges"] * 3, CASES[k]
        masters = torch.sort(torch.cat([g["masters"] for g in got])).values
        assert torch.equal(masters, torch.arange(masters.numel())), CASES[k]
        bcast = sum(s["broadcast_rows"] for s in stats)
        reduce = sum(s["reduce_rows"] for s in stats)
        rows, c = grid_shape(world)
        if part == "iec" or (part == "cvc" and rows == 1):  # a 1 x c grid is IEC
            assert bcast > 0 and reduce == 0
        elif part == "oec":
            assert bcast == 0 and reduce > 0
        else:
            assert bcast > 0 and reduce > 0, CASES[k]
        # what is sent forward comes back backward, except layer 0's reduce of raw features
        # (no gradient; reorder=true reduces transformed rows there, residual projected rows)
        fwd, bwd = (sum(s[f"bytes_{d}"] for s in stats) for d in ("forward", "backward"))
        whole = reduce == 0 or reorder == "true" or model.endswith("_res")
        assert bwd == fwd if whole else 0 < bwd < fwd, CASES[k]
        plain = (part, CASES[k][1].replace("+overlap", "").replace("+wait", ""), model, reorder)
        if "overlap" in CASES[k][1] and plain in CASES:  # the same rows move as without
            j = CASES.index(plain)
            for r in range(world):
                for key in ("bytes_forward", "bytes_backward", "broadcast_rows", "reduce_rows"):
                    assert got[r]["stats"][key] == ranks[r][j]["stats"][key], (CASES[k], key)
        if part == "cvc":  # broadcast within the grid row, reduce within the column
            for r in range(world):
                for q in range(world):
                    if got[r]["bcast_peers"][q]:
                        assert q // c == r // c
                    if got[r]["reduce_peers"][q]:
                        assert q % c == r % c


CPU2 = Topology(0, 2, 0, 2, torch.device("cpu"))


def test_bad_input_is_refused_before_training():
    graph = fns.tiny_graph()
    vc = OecPartitioner().partition(graph, 2)
    with pytest.raises(ValueError, match="cannot run on a vertex-cut: use an edge-cut"):
        VertexCutPlan(graph, vc, GAT(6, 3, hidden=8, heads=2), CPU2)
    with pytest.raises(ValueError, match="book has 3 parts but the run has 2 ranks"):
        VertexCutPlan(graph, OecPartitioner().partition(graph, 3), SAGE(6, 3), CPU2)
    with pytest.raises(ValueError, match="needs a vertex-cut partition book"):
        VertexCutPlan(graph, MetisPartitioner().partition(graph, 2), SAGE(6, 3), CPU2)
    with pytest.raises(ValueError, match="norm=batch"):
        VertexCutPlan(graph, vc, SAGE(6, 3, norm="batch"), CPU2)
    with pytest.raises(ValueError, match="aggr"):
        VertexCutPlan(graph, vc, SAGE(6, 3, aggr="max"), CPU2)
    other = fns.tiny_graph(n=50)
    with pytest.raises(ValueError, match="another graph"):
        VertexCutPlan(other, vc, SAGE(6, 3), CPU2)
