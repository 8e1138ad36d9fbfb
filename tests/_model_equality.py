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


def typed_equal(ranks: list[dict], name: str) -> None:
    """Typed model ``name`` (tests/_traced_fns.py hetero_strategies) on 2 ranks: data's steps
    (one process averaging the ranks' micro-batches), factored's trainer (one process on its
    jobs), split's steps (one process on the whole mini-batches), fullgraph's and offload's
    epochs (one process on the whole graph): losses, gradients and parameters."""
    from tests import _fullgraph_typed_fns as T
    from tests import _offload_fns, _typed_fns

    data = _typed_fns.typed_reference_steps(len(ranks), _typed_fns.STEPS, name)
    assert data["losses"][-1][0] != data["losses"][0][0], name  # it trains
    for rank, r in enumerate(ranks):
        got = r[name]["data"]
        for step in range(_typed_fns.STEPS):
            assert got["losses"][step] == pytest.approx(data["losses"][step][rank], rel=1e-5)
            close(got["grads"][step], data["grads"][step])
        close(got["params"], data["params"])
    trainers = [r[name]["factored"] for r in ranks if r[name]["factored"]["trainer"]]
    assert trainers, name
    jobs, steps = trainers[0]["jobs"], trainers[0]["steps"]
    one = _typed_fns.typed_reference_steps(jobs, steps, name)
    for t in trainers:
        for step in range(steps):
            for slot, loss in t["losses"][step].items():
                assert loss == pytest.approx(one["losses"][step][slot], rel=1e-5), name
            close(t["grads"][step], one["grads"][step])
        close(t["params"], one["params"])
    if "split" not in ranks[0][name]:  # the strategies that run whole sampled blocks only
        return
    split = _split_fns.typed_reference_steps(name, len(ranks))
    full, off = T.reference(name), _offload_fns.whole_graph_epochs(name)
    for r in ranks:
        got = r[name]
        assert got["split"]["losses"] == pytest.approx(split["losses"], rel=1e-5), name
        for a, b in zip(got["split"]["grads"], split["grads"], strict=True):
            close(a, b)
        for kind, ref in (("fullgraph", full), ("offload", off)):
            assert got[kind]["losses"] == pytest.approx(ref["losses"], rel=1e-5), (name, kind)
            for a, b in zip(got[kind]["grads"], ref["grads"], strict=True):
                close(a, b)
