"""Layer-wise evaluation: reordered layers (transform, all-gather, aggregate) equal the convs."""

from __future__ import annotations

import pytest
import torch

from gnnscale.distributed import spawn
from gnnscale.evaluation.evaluate import layerwise_logits
from tests import _evaluate_fns as E


@pytest.mark.parametrize("name", E.MODELS)
@pytest.mark.parametrize("batch", [7, 1000])
def test_reordered_layers_equal_the_convs(name, batch):
    g = E.binary_graph()
    model = E.make_model(name, g)
    assert model.reorders(0) and not model.reorders(1)  # 40 -> 8 shrinks, 8 -> 8 does not
    model.train()
    nodes = torch.cat([g.val_idx, g.test_idx])
    cpu = torch.device("cpu")
    got = layerwise_logits(model, g, nodes, cpu, batch)
    want = layerwise_logits(model, g, nodes, cpu, batch, reorder=False)
    assert model.training  # restored
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_two_ranks_evaluate_as_one_process():
    ranks = spawn(E.evaluate_ranks, 2, E.MODELS)
    for name in E.MODELS:
        logits, metrics = E.reference(name)
        torch.testing.assert_close(torch.cat([r[name][0] for r in ranks]), logits,
                                   rtol=1e-5, atol=1e-6)
        for r in ranks:
            assert set(r[name][1]) >= {"val_rocauc", "test_rocauc", "val_loss", "test_loss"}
            assert r[name][1] == pytest.approx(metrics)


def test_macro_and_micro_f1_per_split_count_each_class():
    from gnnscale.evaluation.evaluate import split_metrics

    # split a: labels 0 0 1 2, predicted 0 1 1 1; split b: labels 0 1, predicted 0 1
    labels = torch.tensor([0, 0, 1, 2, 0, 1])
    pred = torch.tensor([0, 1, 1, 1, 0, 1])
    logits = torch.nn.functional.one_hot(pred, 4).float()  # class 3 is never seen
    out = split_metrics(logits, labels, torch.arange(6), [4, 2], ["a", "b"])
    # a: class 0 F1 2*1/(1+2), class 1 2*1/(3+1), class 2 0; class 3 absent from both
    assert out["a_macro_f1"] == pytest.approx((2 / 3 + 1 / 2 + 0) / 3)
    assert out["a_micro_f1"] == pytest.approx(0.5) == out["a_acc"]
    assert out["b_macro_f1"] == pytest.approx(1.0) and out["b_micro_f1"] == pytest.approx(1.0)
