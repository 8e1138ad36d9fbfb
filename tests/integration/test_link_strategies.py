"""task=link under every strategy on real gloo ranks equals one process on the same seed:
per-step losses and gradients, final parameters, and the evaluation's metrics."""

import pytest
import torch

from gnnscale.distributed import spawn
from tests import _link_fns as L

pytestmark = pytest.mark.slow  # multi-rank / subprocess tests: the slow tier

TOL = dict(rtol=1e-4, atol=1e-5)


def assert_same(got: list, want: list) -> None:
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, **TOL)


def test_one_process_strategies_equal_the_references():
    for kind in ("data", "split"):
        got = L.train(L.CPU, kind)
        ref = L.reference_minibatch(1, shared=kind == "split")
        assert len(got["losses"]) == len(ref["losses"])
        assert_same(got["params"], ref["params"])
    for kind, opts in (("fullgraph", {}), ("offload", {"chunks": 3})):
        got = L.train(L.CPU, kind, opts=opts)
        assert_same(got["params"], L.reference_fullgraph()["params"])


@pytest.mark.parametrize("world", [2, 4])
def test_pair_exchange_scores_and_sends_gradients_back(world):
    ranks = spawn(L.exchange, world)
    one = L.exchange(L.CPU)
    want = torch.zeros(40, 3)
    want[one["ids"]] = one["grad"]
    for r in ranks:
        torch.testing.assert_close(r["scores"], one["scores"])
        torch.testing.assert_close(r["grad"], want[r["ids"]], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("world", [2, 4])
def test_data_parallel_link_equals_one_process(world):
    ranks = spawn(L.train, world, "data")
    ref = L.reference_minibatch(world)
    for rank, r in enumerate(ranks):
        assert len(r["losses"]) == len(ref["losses"])
        for step, loss in enumerate(r["losses"]):
            assert loss == pytest.approx(ref["losses"][step][rank], rel=1e-5)
            assert_same(r["grads"][step], ref["grads"][step])
        assert_same(r["params"], ref["params"])


@pytest.mark.parametrize("world,samplers,jobs", [(2, "1", 1), (4, "2", 2)])
def test_factored_link_equals_one_process(world, samplers, jobs):
    """jobs per trainer and step: a step is ``trainers * jobs`` micro-batches."""
    ranks = spawn(L.train, world, "factored", "mlp", False,
                  {"samplers": samplers, "jobs_per_trainer": jobs})
    trainers = world - int(samplers)
    ref = L.reference_minibatch(trainers * jobs)
    trained = [r for r in ranks if r["reports"]]
    assert len(trained) == trainers
    for rank, r in enumerate(trained):
        for step, loss in enumerate(r["losses"]):
            assert loss == pytest.approx(ref["losses"][step][rank], rel=1e-5)
            assert_same(r["grads"][step], ref["grads"][step])
        assert_same(r["params"], ref["params"])


def test_factored_switching_link_equals_one_process():
    ranks = spawn(L.train, 3, "factored", "mlp", False,
                  {"samplers": "1", "switching": True, "jobs_per_trainer": 2})
    ref = L.reference_minibatch(4)  # 2 trainers, 2 jobs each per step
    for r in ranks:  # every rank holds a replica, updated by each step's reduction
        assert_same(r["params"], ref["params"])


@pytest.mark.parametrize("world,sample_on", [(2, "all"), (4, "all"), (2, "leader")])
def test_split_link_equals_one_process(world, sample_on):
    ranks = spawn(L.train, world, "split", "mlp", False, {"sample_on": sample_on})
    ref = L.reference_minibatch(1, shared=True)
    for r in ranks:
        assert r["losses"] == pytest.approx(ref["losses"], rel=1e-5)
        for got, want in zip(r["grads"], ref["grads"]):
            assert_same(got, want)
        assert_same(r["params"], ref["params"])


@pytest.mark.parametrize("kind,opts", [("fullgraph", {}), ("fullgraph", {"deps": "depcache"}),
                                       ("fullgraph", {"cut": "vertex"}),
                                       ("offload", {"chunks": 3})])
@pytest.mark.parametrize("world", [2, 4])
def test_full_graph_link_equals_one_process(world, kind, opts):
    ranks = spawn(L.train, world, kind, "mlp", True, opts)
    ref = L.reference_fullgraph(evaluate=True)
    for r in ranks:
        assert r["losses"] == pytest.approx(ref["losses"], rel=1e-5)
        for got, want in zip(r["grads"], ref["grads"]):
            assert_same(got, want)
        assert_same(r["params"], ref["params"])
        assert r["metrics"].keys() == ref["metrics"].keys()
        for key, value in ref["metrics"].items():
            assert r["metrics"][key] == pytest.approx(value, rel=1e-4, abs=1e-6), key


@pytest.mark.parametrize("world", [2, 4])
def test_layerwise_link_evaluation_equals_one_process(world):
    ranks = spawn(L.train, world, "split", "dot", True)
    one = L.train(L.CPU, "split", "dot", True)
    for r in ranks:
        assert r["metrics"].keys() == one["metrics"].keys()
        assert {"val_auc", "val_ap", "val_hits@5", "val_mrr", "test_auc"} <= r["metrics"].keys()
        for key, value in one["metrics"].items():
            assert r["metrics"][key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
