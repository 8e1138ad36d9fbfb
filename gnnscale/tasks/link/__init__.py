"""``task=link``: link prediction. ``config.py``: its schema and declarations (torch-free);
``task.py``: :class:`LinkTask`; its parts: ``edge_split.py`` (train/val/test edges, the
message graph), ``negatives.py`` (the native negative sampler), ``decoders.py``,
``metrics.py`` (OGB's semantics) and ``pairs.py`` (scoring pairs whose rows sit on different
ranks)."""

from gnnscale.tasks.link.config import LinkTaskConfig

__all__ = ["LinkTask", "LinkTaskConfig"]


def __getattr__(name: str):
    """``LinkTask`` on first use: its module imports torch, the config (above) does not."""
    if name == "LinkTask":
        from gnnscale.tasks.link.task import LinkTask

        return LinkTask
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
