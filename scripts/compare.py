#!/usr/bin/env python
"""Compare finished runs: ``python scripts/compare.py RUN_DIRS... [--hardware NAME]``
(see gnnscale/compare/cli.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gnnscale.compare.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
