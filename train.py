#!/usr/bin/env python
"""Train a GNN: ``python train.py [group=option ...] [key=value ...]`` (``--help`` lists them)."""

import os
import sys
import time

os.environ.setdefault("GNNSCALE_T0", repr(time.time()))  # runner/phases.py: the import phase

from gnnscale.distributed.threads import quiet_waits  # noqa: E402 - torch-free
from gnnscale.runner.warm import (  # noqa: E402 - torch-free
    compose_once,
    stop_fork_server,
    warm_fork_server,
)

quiet_waits()  # OpenMP threads sleep, not spin, when they wait: before any process loads torch

if __name__ == "__main__":
    warm_fork_server(sys.argv[1:])  # ranks' imports on the other core, while we compose

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from gnnscale import registry  # noqa: E402
from gnnscale.errors import UserError  # noqa: E402
from gnnscale.runner import cli  # noqa: E402 - torch-free

registry.load_all()  # every option's typed schema into Hydra's ConfigStore
SWEEP: cli.Sweep | None = None  # a -m run's jobs (gnnscale/runner/cli.py)


@hydra.main(config_path="configs", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    """Train as the composed ``cfg`` says; a configuration error is one line, status 2 (in a
    sweep: reported, and the other jobs go on)."""
    from gnnscale.runner.run import run
    from gnnscale.runner.runlock import locked

    if SWEEP is not None:  # each job: its folder locked before Hydra's record is written
        return SWEEP.job(cfg, locked(run))
    try:
        locked(run)(cfg)
    except UserError as err:  # what to change, without a traceback; status 2 like argparse
        print(f"error: {err}", file=sys.stderr, flush=True)
        sys.exit(2)


if __name__ == "__main__":
    try:
        try:
            SWEEP = cli.sweep_first(sys.argv[1:])
        except UserError as err:
            print(f"error: {err}", file=sys.stderr, flush=True)
            sys.exit(2)
        compose_once(sys.argv[1:])  # a single run's config composed once, not twice
        main()
        if SWEEP is not None:
            line, status = SWEEP.summary()
            print(line, file=sys.stderr if status else sys.stdout, flush=True)
            sys.exit(status)
    except KeyboardInterrupt:  # Ctrl-C outside the rank launcher (a 1-rank run, processing)
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second one: the clean-up goes on
        print("gnnscale: interrupted", file=sys.stderr, flush=True)
        sys.exit(130)  # 128 + SIGINT, as a shell reports it; exit handlers clean up
    finally:
        stop_fork_server()  # ranks are done; one still importing must not outlive us
        import gc  # skip collecting torch/PyG's object graph at exit (~0.8 s): exit handlers

        gc.freeze()  # still run, the OS frees the memory
