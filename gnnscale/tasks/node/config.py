"""``task=node``'s typed schema, declarations and launcher checks (torch-free: the launcher
composes and checks with it; ``NodeTask`` names it as its ``schema``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from gnnscale.data.metadata import DatasetMeta, lacks_message
from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.tasks.config import TaskConfig


@register("task", "node")
@dataclass
class NodeTaskConfig(TaskConfig):
    """``task=node``: node classification (cross-entropy on the labelled training vertices;
    accuracy, Macro-F1 and Micro-F1, and ROC-AUC for two classes)."""

    name: ClassVar[str] = "node"
    title: ClassVar[str] = "node classification"
    needs: ClassVar[tuple[str, ...]] = ("features", "labels", "train_split")
    metrics: ClassVar[tuple[str, ...]] = ("acc", "rocauc", "macro_f1", "micro_f1")
    auto_metric: ClassVar[tuple[str, ...]] = ("rocauc", "acc")  # ROC-AUC for two classes
    from_parts: ClassVar[bool] = True
    _target_: str = "gnnscale.tasks.node.NodeTask"

    @classmethod
    def check_data(cls, cfg: Any, meta: DatasetMeta, ranks: int = 1) -> None:
        """Features (on a typed graph: none needed, the typed model embeds featureless types),
        labels and a training split; a training vertex at least, and one per rank of
        ``ranks``."""
        if cfg.get("dataset") is not None and meta.is_typed:
            # a typed model reads each type's own features and embeds the featureless ones
            needs = tuple(n for n in cls.needs if n != "features")
            missing = meta.lacks(needs)
            if missing:
                raise ConfigError(lacks_message(meta.name, missing, cls.title, needs))
        elif cfg.get("dataset") is not None:
            super().check_data(cfg, meta, ranks)
        if meta.num_train == 0:
            raise ConfigError(f"the training set of {meta.name} is empty ({meta.num_nodes} "
                              "vertices, none marked for training): give a dataset with a "
                              "training split")
        if meta.num_train < ranks:
            raise ConfigError(f"the training set of {meta.name} has {meta.num_train} vertices "
                              f"but dist.world_size={ranks}: every rank needs a training "
                              f"vertex; use at most {meta.num_train} ranks")
