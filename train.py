#!/usr/bin/env python
"""Train a GNN: ``python train.py [group=option ...] [key=value ...]`` (``--help`` lists them)."""

import os
import sys
import time

os.environ.setdefault("GNNSCALE_T0", repr(time.time()))  # runner/phases.py: the import phase

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from gnnscale import registry  # noqa: E402
from gnnscale.errors import UserError  # noqa: E402

registry.load_all()  # every option's typed schema into Hydra's ConfigStore


@hydra.main(config_path="configs", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    from gnnscale.runner.run import run

    try:
        run(cfg)
    except UserError as err:  # what to change, without a traceback; status 2 like argparse
        print(f"error: {err}", file=sys.stderr, flush=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
