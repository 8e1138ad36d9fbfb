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
    """The failure ends the run at once, not at the deadline: the bound, which counts the
    ranks' start-up (slow on a busy host), is well below the deadline, not near start-up."""
    start = time.monotonic()
    with pytest.raises(RankFailed, match="boom on rank 1"):
        spawn(_dist_fns.fail_on_rank1, 2, timeout_s=300, grace_s=3)
    assert time.monotonic() - start < 200


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_ranks_see_the_launchers_environment_and_folder_at_launch(method, tmp_path, monkeypatch):
    """The fork server starts once and keeps its own environment: a rank must still see what
    the launcher has now (a variable set and a folder entered after the server started)."""
    monkeypatch.setenv("GNNSCALE_START_METHOD", method)
    spawn(_dist_fns.allreduce_rank, 2, 1)  # the server (if any) is running from here on
    monkeypatch.setenv("GNNSCALE_PROBE", "after")
    monkeypatch.chdir(tmp_path)
    out = spawn(_dist_fns.environment, 2, "GNNSCALE_PROBE")
    assert [o[:2] for o in out] == [("after", str(tmp_path))] * 2
    assert all(o[2] == (method == "forkserver") for o in out)


def test_bad_start_method_is_refused(monkeypatch):
    monkeypatch.setenv("GNNSCALE_START_METHOD", "fork")
    with pytest.raises(ValueError, match="GNNSCALE_START_METHOD"):
        spawn(_dist_fns.allreduce_rank, 2, 1)
