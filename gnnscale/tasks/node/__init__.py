"""``task=node``: node classification (``config.py``: its schema and declarations, torch-free;
``task.py``: :class:`NodeTask`)."""

from gnnscale.tasks.node.config import NodeTaskConfig

__all__ = ["NodeTask", "NodeTaskConfig"]


def __getattr__(name: str):
    """``NodeTask`` on first use: its module imports torch, the config (above) does not."""
    if name == "NodeTask":
        from gnnscale.tasks.node.task import NodeTask

        return NodeTask
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
