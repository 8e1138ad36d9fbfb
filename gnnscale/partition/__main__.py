"""``python -m gnnscale.partition``: see :mod:`gnnscale.partition.cli`."""

import sys

from gnnscale.partition.cli import main

if __name__ == "__main__":
    sys.exit(main())
