"""A run under ``cache.feature_dtype=float16|bfloat16`` trains on its features rounded to 16 bits
(the tiers hold them so); its evaluation, predictions and embeddings read them rounded the same
way, not the stored float32 ones."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from gnnscale.evaluation.evaluate import evaluate, features_as, layerwise_logits, served_dtype
from tests import _evaluate_fns as E
from tests._train import TINY, make_cfg


def _rounded(graph, dtype: torch.dtype):
    """``graph`` with its features rounded to ``dtype`` and back (what the tiers serve)."""
    g = copy.copy(graph)
    g.x = graph.x.to(dtype).float()
    return g


@pytest.mark.parametrize("name", E.MODELS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_layerwise_inference_reads_the_features_as_served(name, dtype):
    """Under :func:`features_as` the logits (reordered layer 0 and plain convs alike) equal
    those on the rounded table, and differ from the stored float32 features' (random
    features: the rounding matters); outside it the stored features are read again."""
    g = E.binary_graph()
    g.x = torch.randn(g.x.shape, generator=torch.Generator().manual_seed(0))
    model = E.make_model(name, g).eval()
    nodes = torch.cat([g.val_idx, g.test_idx])
    cpu = torch.device("cpu")
    stored = layerwise_logits(model, g, nodes, cpu, 64)
    want = layerwise_logits(model, _rounded(g, dtype), nodes, cpu, 64)
    with features_as(str(dtype).replace("torch.", "")):
        for reorder in (True, False):
            got = layerwise_logits(model, g, nodes, cpu, 64, reorder=reorder)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(want, stored, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(layerwise_logits(model, g, nodes, cpu, 64), stored)


def test_the_served_dtype_is_the_cache_dtype_of_a_strategy_that_reads_the_cache(tmp_path):
    """``data`` serves its features through the tiers (their dtype); ``fullgraph`` and
    ``offload`` read no cache config: their features are the stored ones."""
    half = "cache.feature_dtype=float16"
    assert served_dtype(make_cfg(tmp_path, "strategy=data", half)) == "float16"
    assert served_dtype(make_cfg(tmp_path, "strategy=split", "cache.feature_dtype=bfloat16")) \
        == "bfloat16"
    assert served_dtype(make_cfg(tmp_path, "strategy=data")) is None
    assert served_dtype(make_cfg(tmp_path, "strategy=fullgraph", half)) is None
    assert served_dtype(make_cfg(tmp_path, "strategy=offload", half)) is None


def test_a_float16_runs_metrics_and_predictions_come_from_its_rounded_features(tmp_path):
    """A ``data`` run under float16: its reported val/test metrics equal evaluation on the
    features rounded to float16 (and its val loss differs from the float32 features'); its
    predictions and embeddings read the same rounded features."""
    import gnnscale

    run = gnnscale.train([*TINY, "epochs=1", "dist.world_size=1", "progress=false",
                          "cache.feature_dtype=float16"],
                         run_dir=tmp_path / "r", data_root=tmp_path / "d")
    g, model = run.graph, run.model
    cpu = torch.device("cpu")
    reported = {k: v for k, v in run.history[-1].items() if k[:4] in ("val_", "test")}
    assert {"val_acc", "val_loss", "test_acc"} <= set(reported)
    half = _rounded(g, torch.float16)
    want = evaluate(model, half, cpu, 512)
    assert reported == pytest.approx({k: want[k] for k in reported}, rel=1e-9, abs=1e-12)
    stored = evaluate(model, g, cpu, 512)
    assert abs(stored["val_loss"] - want["val_loss"]) > 1e-7  # the rounding shows in the loss
    probs = run.predict(progress=False)["nodes"]["prob"]
    every = torch.arange(g.num_nodes)
    logits = layerwise_logits(model, half, every, cpu, 512)
    torch.testing.assert_close(torch.as_tensor(probs), logits.softmax(-1), rtol=1e-6, atol=1e-7)
    rows, _ = run.embed(layer=-1, progress=False)
    np.testing.assert_allclose(rows, logits.numpy(), rtol=1e-6, atol=1e-6)
    plain = layerwise_logits(model, g, every, cpu, 512)  # the tolerances tell the two apart
    assert not torch.allclose(plain.softmax(-1), logits.softmax(-1), rtol=1e-6, atol=1e-7)
    assert not np.allclose(rows, plain.numpy(), rtol=1e-6, atol=1e-6)
