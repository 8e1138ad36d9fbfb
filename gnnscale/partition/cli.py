"""Command line of ``python -m gnnscale.partition`` (and ``scripts/partition.py``): partition
a dataset, print the quality table (cached books are loaded, not recomputed) and, with
``parts=DIR``, write the partitioned layout a run trains from on several hosts.

    python -m gnnscale.partition dataset=products_sim partitioner=metis num_parts=4
    python -m gnnscale.partition dataset=products_sim partitioner=metis dist.world_size=2 \\
        parts=/data/products-2

The Hydra overrides are train.py's (configs/config.yaml); besides them: ``num_parts`` (default
``dist.world_size`` when above 1, else 4), ``cache_root`` (default ``<data_root>/partitions``),
``out`` (write the quality figures as JSON there). ``parts=DIR`` is the run's own key: the
same value given to train.py trains from the layout (docs/distributed.md, "Several hosts,
each with its part").
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from gnnscale import registry

if TYPE_CHECKING:
    from omegaconf import DictConfig

EXTRA_KEYS = ("num_parts", "cache_root", "out")


def num_parts(cfg: DictConfig) -> int:
    """``num_parts``, else ``dist.world_size`` when above 1 (one part per rank), else 4."""
    if cfg.get("num_parts", None):
        return int(cfg.num_parts)
    world = int(cfg.get("dist", {}).get("world_size", 1) or 1)
    return world if world > 1 else 4


def run(cfg: DictConfig, log: Callable[[str], None] = print, parts: int | None = None):
    """Load ``cfg.dataset``, partition it with ``cfg.partitioner`` (cached) into ``parts``
    parts (default :func:`num_parts`), report quality; with ``cfg.parts`` write the layout
    there. Returns the book."""
    from omegaconf import OmegaConf

    from gnnscale.partition.store import get_partition

    registry.load_all()
    graph = registry.build(cfg.dataset).load()
    log(graph.summary())
    k = parts or num_parts(cfg)
    root = cfg.get("cache_root", None) or Path(str(cfg.data_root)) / "partitions"
    book = get_partition(graph, cfg.partitioner, k, cache_root=root, log=log)
    log(book.report())
    if cfg.get("out", None):
        out = Path(str(cfg.out))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(book.quality, indent=1))
        log(f"quality -> {out}")
    if cfg.get("parts", None):
        from gnnscale.partition.parts import write_layout

        def node(c: Any) -> dict:  # a config node (a mapping) as plain values
            return cast(dict, OmegaConf.to_container(c, resolve=True, enum_to_str=True))

        write_layout(graph, book, str(cfg.parts), node(cfg.dataset), node(cfg.partitioner),
                     log=log)
    return book


def compose(overrides: list[str]):
    """Compose configs/config.yaml; ``num_parts=``/``cache_root=``/``out=`` are added keys."""
    from gnnscale.compose import compose as compose_root

    fixed = [f"++{o}" if o.split("=", 1)[0] in EXTRA_KEYS else o for o in overrides]
    return compose_root(fixed, own=True)


def main(argv: list[str] | None = None) -> int:
    """Parse, compose, run; a bad override or bad input is one line and status 2."""
    from gnnscale.errors import UserError

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
    except (ValueError, UserError) as err:  # too many parts, no CVC grid, ...: what to fix
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
