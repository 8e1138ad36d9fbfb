"""ROC-AUC against a pairwise reference, best-epoch selection, per-layer weight decay, input
dropout."""

import itertools

import pytest
import torch

from gnnscale.evaluation.evaluate import roc_auc, split_metrics
from gnnscale.models.gcn import GCN
from gnnscale.optim.adam import Adam
from gnnscale.optim.sgd import SGD
from gnnscale.runner.selection import selection_metric
from gnnscale.tasks.link.config import LinkTaskConfig
from gnnscale.tasks.node.config import NodeTaskConfig


def pairwise_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """P(score of a positive > score of a negative), ties counting half: every pair."""
    pos = scores[labels.bool()].tolist()
    neg = scores[~labels.bool()].tolist()
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


@pytest.mark.parametrize("seed", range(5))
def test_roc_auc_matches_pairwise_reference(seed):
    g = torch.Generator().manual_seed(seed)
    labels = (torch.rand(200, generator=g) < 0.22).long()
    scores = torch.randint(0, 30, (200,), generator=g).double() / 30  # many ties
    scores += 0.2 * labels  # informative
    assert roc_auc(scores, labels) == pytest.approx(pairwise_auc(scores, labels), abs=1e-12)


def test_roc_auc_fixed_values():
    assert roc_auc(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1])) == 0.75
    assert roc_auc(torch.tensor([0.5, 0.5]), torch.tensor([0, 1])) == 0.5
    assert roc_auc(torch.tensor([0.1, 0.9]), torch.tensor([1, 1])) != roc_auc(
        torch.tensor([0.1, 0.9]), torch.tensor([1, 1]))  # NaN: one class only


def test_binary_evaluation_reports_rocauc_and_auto_selects_it():
    logits = torch.tensor([[0.0, 1.0], [1.0, 0.0], [0.0, 2.0], [2.0, 0.0]])
    labels = torch.tensor([1, 0, 0, 1])
    out = split_metrics(logits, labels, torch.arange(4), [2, 2], ["val", "test"])
    assert out["val_acc"] == 1.0 and out["test_acc"] == 0.0
    assert out["val_rocauc"] == 1.0 and out["test_rocauc"] == 0.0
    auto = NodeTaskConfig.auto_metric
    assert selection_metric("auto", [out], auto) == "rocauc"
    assert selection_metric("auto", [{"val_acc": 0.5}], auto) == "acc"
    assert selection_metric("acc", [out], auto) == "acc"


def test_link_selection_reads_the_link_declarations():
    """``auto`` is the link task's declared ``auc``; ``hits`` is the first ``hits@K`` reported
    (task.hits_k's order), not the smallest K."""
    out = {"val_auc": 0.7, "val_hits@50": 0.3, "val_hits@20": 0.2}
    assert selection_metric("auto", [out], LinkTaskConfig.auto_metric) == "auc"
    assert selection_metric("hits", [out], LinkTaskConfig.auto_metric) == "hits@50"


def _gcn() -> GCN:
    torch.manual_seed(0)
    return GCN(12, 3, hidden=8, num_layers=2, dropout=0.0, gcn_norm="graph")


def test_weight_decay_on_chosen_layers_only():
    model = _gcn()
    groups = Adam(lr=0.01, weight_decay=5e-4, weight_decay_layers=[0]).param_groups(model)
    assert {id(p) for p in groups[0]["params"]} == {id(p) for p in model.convs[0].parameters()}
    assert groups[0]["weight_decay"] == 5e-4 and groups[1]["weight_decay"] == 0.0
    # the same update as PyG's example: two groups built by hand
    ref = _gcn()
    opt = torch.optim.Adam([dict(params=ref.convs[0].parameters(), weight_decay=5e-4),
                            dict(params=ref.convs[1].parameters(), weight_decay=0.0)], lr=0.01)
    ours = Adam(lr=0.01, weight_decay=5e-4, weight_decay_layers=[0])(model)
    for m, o in ((model, ours), (ref, opt)):
        for p in m.parameters():
            p.grad = torch.ones_like(p)
        o.step()
    for a, b in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b)


def test_weight_decay_layers_errors():
    with pytest.raises(ValueError, match="weight_decay_layers"):
        Adam(weight_decay_layers=[-1])
    with pytest.raises(ValueError, match="does not have"):
        SGD(weight_decay_layers=[5])(_gcn())
    with pytest.raises(ValueError, match="needs the model"):
        SGD(weight_decay_layers=[0])(_gcn().parameters())


def test_input_dropout_keyed_by_vertex_and_off_in_eval():
    model = GCN(6, 3, hidden=8, num_layers=2, dropout=0.0, input_dropout=0.5)
    x = torch.ones(10, 6)
    ids = torch.arange(100, 110)
    model.set_dropout_key(7, 1)
    a = model.inputs(x, ids)
    assert torch.equal(a, model.inputs(x, ids))  # keyed: the same mask again
    assert torch.equal(a[3:5], model.inputs(x[3:5], ids[3:5]))  # by vertex, not by row
    assert 0.2 < float((a == 0).float().mean()) < 0.8
    model.eval()
    assert torch.equal(model.inputs(x, ids), x)
    with pytest.raises(ValueError, match="input_dropout"):
        GCN(6, 3, input_dropout=1.0)


def test_feature_norm_is_recorded_and_reprocesses(tmp_path):
    """dataset.feature_norm=row: rows sum to 1, recorded in the processed meta, its own copy."""
    import numpy as np

    from gnnscale.data.custom import CustomDataset
    from gnnscale.data.synthetic import SyntheticDataset

    rng = np.random.default_rng(0)
    x = rng.random((50, 8)).astype(np.float32)
    x[3] = 0  # an all-zero row stays zero
    np.savez(tmp_path / "g.npz", edge_index=rng.integers(0, 50, (2, 200)), x=x,
             y=rng.integers(0, 3, 50))
    plain = CustomDataset(root=str(tmp_path / "d"), path=str(tmp_path / "g.npz"))
    normed = CustomDataset(root=str(tmp_path / "d"), path=str(tmp_path / "g.npz"),
                           feature_norm="row")
    assert plain.processed_dir != normed.processed_dir
    g0, g1 = plain.load(), normed.load()
    assert g1.meta["feature_norm"] == "row" and g0.meta["feature_norm"] == "none"
    expect = torch.from_numpy(x / np.maximum(x.sum(1, keepdims=True), 1e-30))
    torch.testing.assert_close(g1.x.float(), expect)
    assert float(g1.x[3].abs().sum()) == 0.0
    with pytest.raises(ValueError, match="non-negative"):  # Gaussian synthetic features
        SyntheticDataset(root=str(tmp_path / "s"), preset="tiny", feature_norm="row").load()
    with pytest.raises(ValueError):
        SyntheticDataset(root=str(tmp_path / "s"), preset="tiny", feature_norm="l2")


def test_reduction_keeps_each_ranks_hit_rate():
    """One process: the per-rank list holds the rank's own rate, recomputed from its counts."""
    from gnnscale.runner.metrics import reduce_over_ranks

    out = reduce_over_ranks({"hits": 3.0, "misses": 1.0, "epoch_time": 2.0})
    assert out["cache_hit_rate"] == 0.75 and out["cache_hit_rate_per_rank"] == [0.75]
    assert reduce_over_ranks({"hits": 0.0, "misses": 0.0})["cache_hit_rate_per_rank"] == [0.0]


def _reduced(topo) -> dict:
    """Rank function: figures that differ per rank, reduced over the world as a factored run
    declares them."""
    from gnnscale.runner.metrics import reduce_over_ranks
    from gnnscale.strategies.factored.config import FactoredConfig

    r = float(topo.rank + 1)
    return reduce_over_ranks({"epoch_time": r, "plan_time": r, "a_new_phase_time": 2 * r,
                              "sampler_busy_time": r, "trainer_idle_time": r,
                              "train_loss": r, "bytes_x": 10.0}, None,
                             FactoredConfig.metric_reductions())


@pytest.mark.slow
def test_every_time_is_the_mean_over_ranks_unless_declared_otherwise():
    """On 2 gloo ranks: ``*_time`` figures average (plan_time too, which offload and fullgraph
    divided by hand, and any new one), ``epoch_time`` takes the slowest rank, factored's role
    totals sum, as the strategy's declarations say; other keys sum."""
    from gnnscale.distributed import spawn

    out = spawn(_reduced, 2, timeout_s=120.0)[0]
    assert out == {"epoch_time": 2.0, "plan_time": 1.5, "a_new_phase_time": 3.0,
                   "sampler_busy_time": 3.0, "trainer_idle_time": 3.0, "train_loss": 1.5,
                   "bytes_x": 20.0}
    from gnnscale.runner.metrics import reduction
    from gnnscale.strategies.factored.config import FactoredConfig

    declared = FactoredConfig.metric_reductions()
    assert [reduction(k, declared) for k in ("compute_time", "presample_time",
                                             "standby_train_time", "recompute_time",
                                             "rows_host_loaded")] == \
        ["mean", "max", "sum", "mean", "sum"]


def test_owned_metrics_equal_the_layerwise_evaluation_order():
    """fullgraph/offload evaluate the logits of their masters (any order); the figures,
    ROC-AUC included, are those of the vertices in split order (the layer-wise evaluation)."""
    from gnnscale.evaluation.evaluate import split_metrics
    from gnnscale.evaluation.owned import owned_metrics
    from tests._data_fns import make_graph

    g = make_graph()
    g.y = g.y % 2
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(g.num_nodes, 2, generator=gen)
    masters = torch.randperm(g.num_nodes, generator=gen)
    got = owned_metrics(logits[masters], masters, g, ["val", "test"], None)
    nodes = torch.cat([g.val_idx, g.test_idx])
    want = split_metrics(logits[nodes], g.y[nodes], torch.arange(nodes.numel()),
                         [g.val_idx.numel(), g.test_idx.numel()], ["val", "test"])
    assert set(got) == {"val_acc", "test_acc", "val_loss", "test_loss", "val_rocauc",
                        "test_rocauc", "val_macro_f1", "test_macro_f1", "val_micro_f1",
                        "test_micro_f1"}
    assert got == pytest.approx(want)


def test_split_metrics_report_the_mean_cross_entropy_per_split():
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(1)
    logits, labels = torch.randn(9, 3, generator=gen), torch.randint(0, 3, (9,), generator=gen)
    positions = torch.randperm(9, generator=gen)  # rows in any order, split by position
    out = split_metrics(logits, labels, positions, [4, 5], ["val", "test"])
    val = positions < 4
    assert out["val_loss"] == pytest.approx(float(F.cross_entropy(logits[val], labels[val])))
    assert out["test_loss"] == pytest.approx(float(F.cross_entropy(logits[~val], labels[~val])))
    assert out["val_acc"] == pytest.approx(
        float((logits[val].argmax(-1) == labels[val]).float().mean()))
