"""strategy=offload on a typed graph (R-GCN: typed chunks, encoded layer-0 rows, a sparse
embedding table) and with edge features (GAT with edge_dim, GINE) on 2 and 4 gloo ranks, against
one process training on the whole graph; and what its launcher checks now let through."""

from __future__ import annotations

import pytest
import torch

from gnnscale.errors import ConfigError
from tests import _offload_fns as O
from tests import _typed_ranks
from tests._train import make_cfg

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny graphs: see conftest

CASES = _typed_ranks.OFFLOAD  # (model, options)


def _close(got: list[torch.Tensor], want: list[torch.Tensor]) -> None:
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def _check(results: list[dict], cases: list[tuple[str, dict]]) -> None:
    """Every epoch's loss and reduced gradients (the embedding table's included) and the
    final parameters equal one process's on the whole graph; the chunks' blocks carry their
    edges' CSC positions and types; edge features visit the device with every chunk that
    computes (counted)."""
    refs = {name: _typed_ranks.reference(O.whole_graph_epochs, name)
            for name in {c[0] for c in cases}}
    for got, (name, opts) in zip(results, cases, strict=True):
        ref = refs[name]
        assert got["losses"] == pytest.approx(ref["losses"], rel=1e-5), (name, opts)
        for g, w in zip(got["grads"], ref["grads"], strict=True):
            _close(g, w)
        _close(got["params"], ref["params"])
        assert got["e_id_ok"] and got["edge_type_ok"]
        m = got["metrics"]
        assert m["rows_host_loaded"] == got["planned_rows"]
        assert 0 < m["peak_device_bytes"] <= m["device_bound_bytes"]
        if name in ("rgcn", "rgat"):
            assert m["embedding_rows_held"] == 15  # the featureless type's table
        if name == "rgcn":
            assert "bytes_edge_features" not in m
        else:
            assert m["bytes_edge_features"] == got["planned_edge_bytes"] > 0


def test_one_rank_equals_one_process():
    cases = [CASES[0], CASES[2]]
    _check(O.offload_epochs(None, cases), cases)


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 4])
def test_ranks_equal_one_process(world):
    """Every case on 2 ranks; R-GCN (3 chunks) and R-GAT on 4. R-GCN's sparse table gets each
    rank's masters' rows, summed over the ranks."""
    cases = _typed_ranks.PLANS[world]["offload"]
    for r in _typed_ranks.runs(world):
        _check(r["offload"], cases)


def test_the_launcher_lets_offload_train_types_and_edge_features(tmp_path):
    """Typed graphs and edge features pass offload's checks; one-hot featureless input (vertex
    ids, not rows for the host tier) is refused in one line."""
    from gnnscale.data.metadata import DatasetMeta
    from gnnscale.strategies.config import Checked, declared
    from tests import _typed_fns

    cfg = make_cfg(tmp_path, "model=gat", "model.edge_dim=auto", "model.num_layers=2",
                   "strategy=offload", "dist.world_size=2")
    built = Checked.build(cfg, DatasetMeta.of(O.case_graph("gat_edge")))
    declared(cfg.strategy).check_config(cfg, built)
    declared(cfg.strategy).check_data(cfg, built)
    cfg = make_cfg(tmp_path, "model=rgcn", "model.num_layers=2", "strategy=offload",
                   "strategy.chunks=4", "dist.world_size=2")
    built = Checked.build(cfg, DatasetMeta.of(_typed_fns.make_typed_graph()))
    declared(cfg.strategy).check_config(cfg, built)
    declared(cfg.strategy).check_data(cfg, built)
    from gnnscale.models.schemas import RGCNConfig
    from gnnscale.strategies.offload.config import check_options

    with pytest.raises(ConfigError, match="model.featureless=embedding"):
        check_options(4, "inter+intra", "auto", None, RGCNConfig(featureless="onehot"))


def test_chunk_products_keep_one_sum_per_slot_side_by_side():
    """An aggregate with several sums per destination (a typed model's per relation): edge
    ``e`` sums into slot ``slot[e]`` of its destination's row, which is ``slots`` times as wide
    as the input; the cached transpose gives the sources' gradient of that wider aggregate."""
    from gnnscale.models.sage import SAGE
    from gnnscale.sampling.base import Block
    from gnnscale.strategies.offload.compute import ChunkProducts

    g = torch.Generator().manual_seed(0)
    n_src, n_dst, e, slots, d = 9, 4, 30, 3, 5
    dst = torch.randint(0, n_dst, (e,), generator=g).sort().values
    src = torch.randint(0, n_src, (e,), generator=g)
    slot, w = torch.randint(0, slots, (e,), generator=g), torch.rand(e, generator=g)
    block = Block(torch.stack([src, dst]), (n_src, n_dst))
    model = SAGE(d, 2, hidden=d, num_layers=2, aggr="sum")
    prod = ChunkProducts.of(block, w, torch.float32, slot, slots)
    x = torch.randn(n_src, d, generator=g, requires_grad=True)
    want = torch.zeros(n_dst, slots, d).index_put_((dst, slot), w[:, None] * x[src],
                                                   accumulate=True).view(n_dst, slots * d)
    got = prod.aggregate(model, 0, x)
    torch.testing.assert_close(got, want)
    grad = torch.randn(n_dst, slots * d, generator=g)
    (gx,) = torch.autograd.grad(want, x, grad)
    torch.testing.assert_close(prod.aggregate_grad(model, grad), gx)
