"""What is learned (``task=``): node classification and link prediction.

One small base class (:class:`~gnnscale.tasks.base.Task`: the head, the loss and the
metrics), one file per option (``node.py``, ``link.py``), their torch-free schemas in
``schemas.py``; link prediction's parts beside it: ``edge_split.py`` (train/val/test edges, the
message graph), ``negatives.py`` (the native negative sampler), ``decoders.py``,
``metrics.py`` (OGB's semantics) and ``pairs.py`` (scoring pairs whose rows sit on different
ranks). A model never knows the task; a strategy calls the task's seams, whatever it is.
"""
