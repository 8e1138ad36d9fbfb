"""One torchrun rank of the multi-host tests: train several configs in turn, as train.py would.

``python -m tests._hosts_driver PLAN.json HOST_ROOT`` (under torchrun) reads the plan, a JSON
list of ``[name, [override, ...]]``, and for each entry composes the config exactly as
``train.py`` does (``tests._train.make_cfg``: data in ``HOST_ROOT/data``, the run folder
``HOST_ROOT/<name>``; ``{host}`` in an override is ``HOST_ROOT``, e.g. ``parts={host}/L``) and
trains it with :func:`gnnscale.runner.run.run`. Every run joins and
leaves torchrun's process group in turn, so one launch per host trains every strategy: the
ranks import torch, PyG and gnnscale once (most of a launch's cost on a small host).
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("GNNSCALE_T0", repr(time.time()))

from gnnscale.distributed.threads import quiet_waits  # noqa: E402 - torch-free

quiet_waits()  # as train.py: before anything loads torch

import json  # noqa: E402
from pathlib import Path  # noqa: E402


def main(plan_file: str, host_root: str) -> int:
    """Train every entry of the plan; a configuration error ends the rank with status 2."""
    from gnnscale.errors import UserError
    from gnnscale.runner.run import run
    from tests._train import make_cfg

    root = Path(host_root)
    rank = os.environ.get("RANK", "?")
    for name, overrides in json.loads(Path(plan_file).read_text()):
        cfg = make_cfg(root, *(o.replace("{host}", str(root)) for o in overrides), run=name)
        t0 = time.perf_counter()
        try:
            run(cfg)
        except UserError as err:
            print(f"error: {name}: {err}", file=sys.stderr, flush=True)
            return 2
        print(f"hosts-driver: rank {rank} trained {name} in {time.perf_counter() - t0:.2f}s "
              f"(at {time.time():.2f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
