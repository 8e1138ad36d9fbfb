"""Planetoid citation graphs (Cora, CiteSeer, PubMed) with the public split, via PyG's class.

Raw files ``ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}`` are looked up in ``raw_dir``
when given, else in ``<root>/planetoid/<Name>/raw``, ``<root>/<Name>/raw`` and the shared
datasets folder; they are copied into ``<root>/<key>/pyg`` (PyG writes ``processed/`` next to
``raw/``), so PyG never downloads and never writes into a shared copy.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from gnnscale.data.base import Dataset, DatasetConfig
from gnnscale.data.convert import find_raw, from_pyg, raw_candidates, stage_raw
from gnnscale.data.graph import GraphStore
from gnnscale.registry import register

NAMES = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}
PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")


class PlanetoidDataset(Dataset):
    """``Planetoid(root, name)`` with its public split (20 train nodes per class, 500 val,
    1000 test), as an undirected CSC graph."""

    def __init__(self, root: str = "data", name: str = "Cora", raw_dir: str | None = None,
                 feature_norm: str = "none") -> None:
        super().__init__(root, feature_norm)
        if name.lower() not in NAMES:
            raise ValueError(
                f"unknown Planetoid dataset {name!r}; choose one of {list(NAMES.values())}"
            )
        self.name = NAMES[name.lower()]
        self.raw_dir = raw_dir

    @property
    def key(self) -> str:
        return self.name.lower()

    @property
    def raw_files(self) -> list[str]:
        return [f"ind.{self.name.lower()}.{part}" for part in PARTS]

    def process(self) -> GraphStore:
        from torch_geometric.datasets import Planetoid

        candidates = raw_candidates(
            self.raw_dir, self.root, f"planetoid/{self.name}/raw", f"{self.name}/raw"
        )
        src = find_raw(candidates, self.raw_files, f"Planetoid {self.name}")
        work = self.root / self.key / "pyg"
        stage_raw(src, self.raw_files, work / self.name / "raw")
        try:
            ds = Planetoid(str(work), self.name, split="public")
            return from_pyg(ds[0], self.key, ds.num_classes, source=str(src), split_name="public")
        finally:
            shutil.rmtree(work, ignore_errors=True)


@register("dataset", "planetoid")
@dataclass
class PlanetoidConfig(DatasetConfig):
    """Options ``cora``, ``citeseer``, ``pubmed``."""

    _target_: str = "gnnscale.data.planetoid.PlanetoidDataset"
    name: str = "Cora"
    raw_dir: str | None = None
