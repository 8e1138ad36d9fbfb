#!/usr/bin/env python
"""Train a GNN: ``python train.py [group=option ...] [key=value ...]`` (``--help`` lists them)."""

import sys

import hydra
from omegaconf import DictConfig

from gnnscale import registry
from gnnscale.errors import UserError

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
