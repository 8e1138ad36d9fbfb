"""strategy=data on real gloo ranks equals one process averaging the micro-batch losses."""

import pytest
import torch

from gnnscale.distributed import spawn
from tests import _data_fns

pytestmark = pytest.mark.slow  # multi-rank / subprocess tests: the slow tier


@pytest.mark.parametrize("world", [2, 4])
def test_data_parallel_matches_single_process(world):
    ranks = spawn(_data_fns.data_parallel_steps, world)
    ref = _data_fns.reference_steps(world)
    for step in range(_data_fns.STEPS):
        for rank in range(world):
            assert ranks[rank]["losses"][step] == pytest.approx(ref["losses"][step][rank],
                                                                rel=1e-5)
            for got, want in zip(ranks[rank]["grads"][step], ref["grads"][step]):
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
    for rank in range(world):
        for got, want in zip(ranks[rank]["params"], ref["params"]):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
