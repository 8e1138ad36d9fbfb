"""``python -m gnnscale.compare RUN_DIRS...``"""

import sys

from gnnscale.compare.cli import main

sys.exit(main())
