"""gnn-benchmark graphs (Shchur et al.): Amazon Computers/Photo, Coauthor CS/Physics.

Read through PyG's ``Amazon`` / ``Coauthor`` classes from their npz files (looked up in
``raw_dir``, ``<root>/npz/<Name>/raw``, ``<root>/<Name>/raw``, then the shared datasets folder;
copied into a working folder so PyG never downloads or writes into a shared copy). The files
carry no split: a seeded random one takes ``train_per_class`` and ``val_per_class`` nodes of
every class (Shchur et al.'s 20 / 30) and puts every other node in test.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from gnnscale.data.base import Dataset, DatasetConfig
from gnnscale.data.convert import find_raw, from_pyg, per_class_split, raw_candidates, stage_raw
from gnnscale.data.graph import GraphStore
from gnnscale.registry import register

# option -> (PyG class, folder name, raw file)
GRAPHS = {
    "computers": ("Amazon", "Computers", "amazon_electronics_computers.npz"),
    "photo": ("Amazon", "Photo", "amazon_electronics_photo.npz"),
    "cs": ("Coauthor", "CS", "ms_academic_cs.npz"),
    "physics": ("Coauthor", "Physics", "ms_academic_phy.npz"),
}


class NpzDataset(Dataset):
    """One gnn-benchmark graph with a seeded per-class random split."""

    def __init__(self, root: str = "data", name: str = "computers", raw_dir: str | None = None,
                 train_per_class: int = 20, val_per_class: int = 30, split_seed: int = 0,
                 feature_norm: str = "none") -> None:
        super().__init__(root, feature_norm)
        if name.lower() not in GRAPHS:
            raise ValueError(f"unknown gnn-benchmark graph {name!r}; choose one of {list(GRAPHS)}")
        if train_per_class < 1 or val_per_class < 0:
            raise ValueError("need train_per_class >= 1 and val_per_class >= 0")
        self.name = name.lower()
        self.raw_dir = raw_dir
        self.train_per_class, self.val_per_class = int(train_per_class), int(val_per_class)
        self.split_seed = int(split_seed)

    @property
    def key(self) -> str:
        return (f"{self.name}-split{self.train_per_class}-{self.val_per_class}"
                f"-seed{self.split_seed}")

    def process(self) -> GraphStore:
        import torch_geometric.datasets as pyg_datasets

        cls_name, folder, raw_file = GRAPHS[self.name]
        candidates = raw_candidates(self.raw_dir, self.root, f"npz/{folder}/raw", f"{folder}/raw")
        src = find_raw(candidates, [raw_file], f"{cls_name} {folder}")
        work = self.root / self.key / "pyg"
        stage_raw(src, [raw_file], work / folder / "raw")
        try:
            ds = getattr(pyg_datasets, cls_name)(str(work), folder)
            data = ds[0]
            split = per_class_split(data.y, ds.num_classes, self.train_per_class,
                                    self.val_per_class, self.split_seed)
            return from_pyg(data, self.name, ds.num_classes, split=split, source=str(src),
                            split_name=f"{self.train_per_class}/{self.val_per_class} per class, "
                                       f"seed {self.split_seed}")
        finally:
            shutil.rmtree(work, ignore_errors=True)


@register("dataset", "npz")
@dataclass
class NpzConfig(DatasetConfig):
    """Options ``computers``, ``photo``, ``cs``, ``physics``."""

    _target_: str = "gnnscale.data.npz.NpzDataset"
    name: str = "computers"
    raw_dir: str | None = None
    train_per_class: int = 20
    val_per_class: int = 30
    split_seed: int = 0
