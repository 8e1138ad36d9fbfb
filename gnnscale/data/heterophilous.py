"""Heterophilous benchmark graphs (Platonov et al.), e.g. Tolokers, via PyG's class.

The npz ``<name>.npz`` is looked up in ``raw_dir``, ``<root>/heterophilous/<name>/raw``,
``<root>/<name>/raw`` and the shared datasets folder, and copied into a working folder. The
graphs come with 10 fixed splits; ``split`` picks one.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from gnnscale.data.base import Dataset, DatasetConfig
from gnnscale.data.convert import find_raw, from_pyg, raw_candidates, stage_raw
from gnnscale.data.graph import GraphStore
from gnnscale.registry import register

NAMES = ("roman_empire", "amazon_ratings", "minesweeper", "tolokers", "questions")
NUM_SPLITS = 10


class HeterophilousDataset(Dataset):
    """``HeterophilousGraphDataset(root, name)`` with fixed split number ``split``."""

    def __init__(self, root: str = "data", name: str = "tolokers", raw_dir: str | None = None,
                 split: int = 0, feature_norm: str = "none") -> None:
        super().__init__(root, feature_norm)
        self.name = name.lower().replace("-", "_")
        if self.name not in NAMES:
            raise ValueError(f"unknown heterophilous graph {name!r}; choose one of {NAMES}")
        if not 0 <= split < NUM_SPLITS:
            raise ValueError(f"split must lie in [0, {NUM_SPLITS}), got {split}")
        self.raw_dir, self.split = raw_dir, int(split)

    @property
    def key(self) -> str:
        return f"{self.name}-split{self.split}"

    def process(self) -> GraphStore:
        from torch_geometric.datasets import HeterophilousGraphDataset

        raw_file = f"{self.name}.npz"
        candidates = raw_candidates(
            self.raw_dir, self.root, f"heterophilous/{self.name}/raw", f"{self.name}/raw"
        )
        src = find_raw(candidates, [raw_file], f"heterophilous graph {self.name}")
        work = self.root / self.key / "pyg"
        stage_raw(src, [raw_file], work / self.name / "raw")
        try:
            ds = HeterophilousGraphDataset(str(work), self.name)
            data = ds[0]
            split = {s: getattr(data, f"{s}_mask")[:, self.split] for s in ("train", "val", "test")}
            return from_pyg(data, self.name, ds.num_classes, split=split, source=str(src),
                            split_name=f"fixed split {self.split}")
        finally:
            shutil.rmtree(work, ignore_errors=True)


@register("dataset", "heterophilous")
@dataclass
class HeterophilousConfig(DatasetConfig):
    """Option ``tolokers``."""

    _target_: str = "gnnscale.data.heterophilous.HeterophilousDataset"
    name: str = "tolokers"
    raw_dir: str | None = None
    split: int = 0
