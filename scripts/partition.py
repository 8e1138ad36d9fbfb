#!/usr/bin/env python
"""Partition a dataset and print the quality table (cached books are loaded, not recomputed).

    python scripts/partition.py dataset=products_sim partitioner=metis num_parts=4

Besides the Hydra overrides of configs/config.yaml: ``num_parts`` (default 4), ``cache_root``
(default ``<data_root>/partitions``) and ``out`` (write the quality figures as JSON there).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from gnnscale import registry
from gnnscale.partition import PartitionBook, get_partition

EXTRA_KEYS = ("num_parts", "cache_root", "out")


def run(cfg, log: Callable[[str], None] = print) -> PartitionBook:
    """Load ``cfg.dataset``, partition it with ``cfg.partitioner`` (cached), report quality."""
    registry.load_all()
    graph = registry.build(cfg.dataset).load()
    log(graph.summary())
    num_parts = int(cfg.get("num_parts", None) or 4)
    root = cfg.get("cache_root", None) or Path(str(cfg.data_root)) / "partitions"
    book = get_partition(graph, cfg.partitioner, num_parts, cache_root=root, log=log)
    log(book.report())
    if cfg.get("out", None):
        out = Path(str(cfg.out))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(book.quality, indent=1))
        log(f"quality -> {out}")
    return book


def compose(overrides: list[str]):
    """Compose configs/config.yaml; ``num_parts=``/``cache_root=``/``out=`` are added keys."""
    from hydra import compose as hydra_compose
    from hydra import initialize

    fixed = [f"++{o}" if o.split("=", 1)[0] in EXTRA_KEYS else o for o in overrides]
    registry.load_all()
    with initialize(config_path="../configs", version_base=None):
        return hydra_compose(config_name="config", overrides=fixed)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    try:
        cfg = compose(argv)
    except Exception as err:  # composition errors name the bad key or option
        print(f"could not compose the config from configs/config.yaml with {argv}:\n  {err}\n"
              "check the override names (e.g. partitioner=metis dataset=synthetic num_parts=4)",
              file=sys.stderr)
        return 2
    try:
        run(cfg)
    except ValueError as err:  # bad input (too many parts, no CVC grid, ...): say what to fix
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
