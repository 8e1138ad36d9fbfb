"""strategy=split with dropout on: every rank, and every rank that recomputes a remote row
(the hybrid's replicas), draws the mask one process draws for that vertex and layer (keyed by
seed, step, layer, global vertex id), so a step equals one process with dropout 0.5: built-in
SAGE (hidden and input dropout), the residual stack, and traced user models calling
``F.dropout`` themselves."""

import pytest
import torch

from gnnscale.distributed import spawn
from tests import _split_dropout_fns as D

pytestmark = pytest.mark.slow  # multi-rank: the slow tier

CASES = [("sage", "depcomm", "shuffle"), ("sage", "hybrid", "read"),
         ("sage_res", "hybrid", "shuffle"), ("user_t_sagejk", "depcomm", "read"),
         ("user_t_sagejk", "hybrid", "shuffle"), ("user_t_gcnskip", "hybrid", "read")]


def test_a_steps_masks_are_factoreds():
    """split keys a step's masks as factored keys that step's jobs (docs/strategies/split.md)."""
    from gnnscale.strategies.factored import sync
    from gnnscale.strategies.split.strategy import dropout_step_key

    assert sync.dropout_step_key is dropout_step_key  # one key, in strategies/base.py
    assert dropout_step_key(3, 7) == (3 << 32) | 7 != dropout_step_key(7, 3)


@pytest.mark.parametrize("world", [2, 4])
def test_split_with_dropout_equals_one_process(world):
    ranks = spawn(D.split_steps, world, CASES)
    for k, (model, deps, _) in enumerate(CASES):
        ref = D.reference_steps(model, world)
        # dropout acts: without it the first loss is another
        assert D.reference_steps(model, world, p=0.0)["losses"][0] != pytest.approx(
            ref["losses"][0], rel=1e-4), model
        for r in range(world):
            got = ranks[r][k]
            assert got["losses"] == pytest.approx(ref["losses"], rel=1e-5), (CASES[k], r)
            for step, (a, b) in enumerate(zip(got["grads"], ref["grads"], strict=True)):
                for ga, gb in zip(a, b, strict=True):
                    where = f"{CASES[k]} rank {r} step {step}"
                    torch.testing.assert_close(ga, gb, rtol=1e-4, atol=1e-6,
                                               msg=lambda m, w=where: f"{w}: {m}")
            assert got["key_after"] is None  # evaluation after training: torch's dropout
        if deps == "hybrid":  # replicas were recomputed, each with its owner's mask
            assert sum(ranks[r][k]["replicated"] for r in range(world)) > 0, CASES[k]
