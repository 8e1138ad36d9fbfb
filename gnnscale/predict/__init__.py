"""``python -m gnnscale.predict run_dir=DIR [out=DIR] [format=parquet|npy] [split=all]
[pairs=FILE|val|test] [top_k=K] [sources=FILE] ...``: a finished run's predictions keyed by the
user's ids, written by :func:`gnnscale.runner.predict.predict` (per node for node
classification; pair scores and exact top-k destinations for link prediction)."""
