#!/usr/bin/env python
"""``python scripts/bench.py SUITE|all [--quick] [--out PATH]``: runs ``python -m benchmarks``.

The suites live in the top-level ``benchmarks/`` folder, outside the installed package; this
script runs them with the repository root as the module search root.
"""

import os
import subprocess
import sys
from pathlib import Path

if __name__ == "__main__":
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)}
    sys.exit(subprocess.call([sys.executable, "-m", "benchmarks", *sys.argv[1:]], env=env))
