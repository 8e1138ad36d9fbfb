#!/usr/bin/env python
"""Compare finished runs: ``python scripts/compare.py RUN_DIRS... [--hardware NAME]``
(see gnnscale/compare/cli.py)."""

import sys

from gnnscale.compare.cli import main

if __name__ == "__main__":
    sys.exit(main())
