"""``gather_rows`` (the ranks' rows received into one buffer) equals the concatenation of
``all_gather_rows`` on real gloo ranks, parts of equal and unequal sizes, empty ones included."""

import pytest
import torch

from gnnscale.distributed import spawn
from tests import _collective_fns


@pytest.mark.slow
@pytest.mark.parametrize("world,sizes", [(2, [5, 5]), (3, [4, 3, 3]), (3, [0, 7, 2]),
                                         (4, [1, 6, 0, 6]), (2, [0, 0])])
def test_gather_rows_equals_the_concatenation_of_every_ranks_part(world, sizes):
    for one, listed in spawn(_collective_fns.gathered, world, sizes, 3, timeout_s=60):
        assert one.shape == (sum(sizes), 3)
        torch.testing.assert_close(one, listed, rtol=0, atol=0)
        expect = torch.cat([r * 1000 + torch.arange(n, dtype=torch.float32)
                            for r, n in enumerate(sizes)])
        torch.testing.assert_close(one[:, 0], expect, rtol=0, atol=0)


def test_gather_rows_of_one_process_is_its_part():
    part = torch.randn(4, 2)
    assert _collective_fns.gather_rows(part) is part
