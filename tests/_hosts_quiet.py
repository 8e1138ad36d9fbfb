"""One torchrun rank of the round-four host tests: collectives until a peer goes quiet.

``python -m tests._hosts_quiet FOLDER TIMEOUT_S`` (under torchrun) joins the run through
:class:`gnnscale.distributed.local.Launcher` with ``dist.timeout_s=TIMEOUT_S`` and all-reduces
a tensor every 50 ms for ever; after the first one each rank writes its pid to
``FOLDER/rank<r>.pid``. The test then stops a rank or takes a host's link down; the ranks left
end by their deadline, with the launcher's message.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def collectives(topo, folder: str) -> None:
    """All-reduce for ever (a rank's pid written after the first)."""
    import torch
    import torch.distributed as dist

    t = torch.ones(4)
    dist.all_reduce(t)
    Path(folder, f"rank{topo.rank}.pid").write_text(str(os.getpid()))
    while True:
        dist.all_reduce(t)
        time.sleep(0.05)


def main(folder: str, timeout_s: str) -> int:
    from gnnscale.distributed.local import Launcher

    Launcher(backend="gloo", device="cpu", timeout_s=float(timeout_s),
             threads_per_rank=1).launch(collectives, folder)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
