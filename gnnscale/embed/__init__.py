"""``python -m gnnscale.embed run_dir=DIR [layer=-1] [out=FILE] [format=npy|parquet]
[world_size=1] [batch_size=4096] [progress=true] [data_root=DIR]``: every node's embeddings
from a trained run, keyed by the user's ids, written by :func:`gnnscale.runner.embed.embed`
(layer-wise inference, bounded memory)."""
