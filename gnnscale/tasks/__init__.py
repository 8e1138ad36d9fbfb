"""What is learned (``task=``): node classification and link prediction.

One subpackage per task (``task=<name>`` picks ``gnnscale/tasks/<name>/``, mirroring
``configs/task/<name>.yaml``), each holding its torch-free schema and declarations
(``config.py``), its class (``task.py``) and everything only it uses (link prediction:
``edge_split.py``, ``negatives.py``, ``decoders.py``, ``metrics.py``, ``pairs.py``). One small
base class (:class:`~gnnscale.tasks.base.Task`: the head, the loss and the metrics) and the
base of the declarations (:class:`~gnnscale.tasks.config.TaskConfig`, found from a config by
:func:`~gnnscale.tasks.config.declared_task`). A model never knows the task; a strategy calls
the task's seams, whatever it is.
"""
