#!/usr/bin/env python
"""Train a GNN: ``python train.py [group=option ...] [key=value ...]`` (``--help`` lists them).

The same entry as ``python -m gnnscale`` (:func:`gnnscale.__main__.main`), in a clone."""

import os
import time

os.environ.setdefault("GNNSCALE_T0", repr(time.time()))  # runner/phases.py: the import phase

if __name__ == "__main__":
    from gnnscale.__main__ import main

    main()
