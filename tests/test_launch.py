import time

import pytest

from gnnscale.distributed import RankFailed, spawn
from tests import _dist_fns


@pytest.mark.parametrize("world", [2, 4])
def test_spawn_allreduce(world):
    out = spawn(_dist_fns.allreduce_rank, world, 1)
    expected = world * 1 + sum(range(world))
    assert out == [expected] * world


def test_failing_rank_ends_run_with_its_traceback():
    start = time.monotonic()
    with pytest.raises(RankFailed, match="boom on rank 1"):
        spawn(_dist_fns.fail_on_rank1, 2, timeout_s=60, grace_s=3)
    assert time.monotonic() - start < 45
