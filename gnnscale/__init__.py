"""gnnscale: config-driven, multi-strategy GNN training for graphs that outgrow one device.

From Python (docs/python-api.md): ``gnnscale.train(overrides=[...])`` trains as ``train.py``
does and returns a :class:`~gnnscale.api.Run`; ``gnnscale.load_run(run_dir)`` opens a finished
one. These load on first use: importing ``gnnscale`` imports nothing heavy.
"""

from gnnscale.lazy import lazy_exports

__version__ = "0.1.0"
__all__ = ["Run", "RankFailed", "load_run", "shutdown", "train"]

__getattr__ = lazy_exports(__name__, {"train": "gnnscale.api", "load_run": "gnnscale.api",
                                      "Run": "gnnscale.api", "shutdown": "gnnscale.api",
                                      "RankFailed": "gnnscale.distributed.launch"})
