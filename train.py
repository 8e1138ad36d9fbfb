#!/usr/bin/env python
"""Train a GNN: ``python train.py [group=option ...] [key=value ...]`` (``--help`` lists them)."""

import hydra
from omegaconf import DictConfig

from gnnscale import registry

registry.load_all()  # every option's typed schema into Hydra's ConfigStore


@hydra.main(config_path="configs", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    from gnnscale.runner.run import run

    run(cfg)


if __name__ == "__main__":
    main()
