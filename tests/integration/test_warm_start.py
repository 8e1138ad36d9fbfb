"""The fork server is started first thing when a command line will start ranks, and only then."""

import pytest

from gnnscale.runner.warm import needs_ranks


@pytest.mark.parametrize(("argv", "env", "want"), [
    ([], {}, True),  # the default config trains on 2 ranks
    (["dist.world_size=4", "strategy=split"], {}, True),
    (["dist.world_size=1"], {}, False),
    (["-m", "dist.world_size=1", "seed=0,1"], {}, False),
    (["-m", "dist.world_size=1,2"], {}, True),
    (["dist.world_size=2", "dist.world_size=1"], {}, False),  # the last override wins
    (["--help"], {}, False),
    (["--cfg", "job"], {}, False),
    ([], {"GNNSCALE_START_METHOD": "spawn"}, False),
    ([], {"LOCAL_RANK": "0"}, False),  # under torchrun
])
def test_needs_ranks(argv, env, want):
    assert needs_ranks(argv, env) == want


def test_the_module_is_torch_free():
    import subprocess
    import sys

    code = "import sys, gnnscale.runner.warm; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr
