#!/usr/bin/env python
"""Partition a dataset and print the quality table (cached books are loaded, not recomputed);
``parts=DIR`` also writes the partitioned layout. The same as ``python -m gnnscale.partition``
(:mod:`gnnscale.partition.cli`, whose docstring lists the keys):

    python scripts/partition.py dataset=products_sim partitioner=metis num_parts=4
"""

from __future__ import annotations

import sys

from gnnscale.partition.cli import EXTRA_KEYS, compose, main, run

__all__ = ["EXTRA_KEYS", "compose", "main", "run"]

if __name__ == "__main__":
    sys.exit(main())
