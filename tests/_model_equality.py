"""Equality checks shared by the user-model tests (test_custom_models, test_traced_models): a
rank's results under each strategy against one process's."""

from __future__ import annotations

import pytest
import torch

from tests import _factored_fns, _split_fns
from tests import _fullgraph_fns as F


def close(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    """Each tensor of ``a`` close to the one of ``b`` at the same place."""
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-6)


def matches(trainer: dict, ref: dict, t: int) -> None:
    """A data/factored trainer's steps against one process's micro-batch ``t``."""
    assert len(trainer["losses"]) == len(ref["losses"])
    for step, loss in enumerate(trainer["losses"]):
        assert loss == pytest.approx(ref["losses"][step][t], rel=1e-5)
        close(trainer["grads"][step], ref["grads"][step])
    close(trainer["params"], ref["params"])


def staged_equal(ranks: list[dict], name: str) -> None:
    """Model ``name`` under fullgraph, offload and split on every rank: one process's loss and
    gradients."""
    full = F.reference(name)
    for r in ranks:
        for case in r[name]["fullgraph"]:
            assert case["loss"] == pytest.approx(full["loss"], rel=1e-5), name
            close(case["grads"], full["grads"])
        off = r[name]["offload"][0]
        assert off["train_loss"] == pytest.approx(full["loss"], rel=1e-5), name
        close(off["grads"], full["grads"])
    split = _split_fns.reference(name)
    for r in ranks:
        got = r[name]["split"][0]["read"]
        assert got["loss"] == pytest.approx(split["loss"], rel=1e-5), name
        close(got["grads"], split["grads"])


def trainers_equal(ranks: list[dict], name: str) -> None:
    """Model ``name`` under data (2 ranks) and factored (one trainer): one process's steps."""
    two, one = (_factored_fns.reference_epoch(t, model=name) for t in (2, 1))
    for rank, r in enumerate(ranks):
        matches(r[name]["data"], two, rank)
    trainers = [r[name]["factored"] for r in ranks if r[name]["factored"]["trainer"]]
    assert len(trainers) == 1
    matches(trainers[0], one, 0)
