"""Planetoid citation graphs (Cora, CiteSeer, PubMed) with the public split.

Raw files ``ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}`` are looked up in ``raw_dir``
when given, else in ``<root>/planetoid/<Name>/raw``, ``<root>/<Name>/raw`` and the shared
datasets folder, and read in place (nothing is written next to them). They are pickles: they
are read with an allow-list (:mod:`gnnscale.data.safe_pickle`), so a tampered file cannot run
code. The graph is the one PyG's ``Planetoid`` builds from the same files (the same bytes:
tested): Kipf & Welling's layout, self loops and repeated edges dropped, made undirected.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from gnnscale.data import safe_pickle
from gnnscale.data.base import Dataset
from gnnscale.data.convert import find_raw, raw_candidates
from gnnscale.data.graph import GraphStore
from gnnscale.data.schemas import PLANETOID_NAMES, PlanetoidConfig

PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")


class PlanetoidDataset(Dataset):
    """``Planetoid(root, name)`` with its public split (20 train nodes per class, 500 val,
    1000 test), as an undirected CSC graph."""

    def __init__(self, root: str = "data", name: str = "Cora", raw_dir: str | None = None,
                 feature_norm: str = "none",
                 memory_budget: int | str | None = None) -> None:
        super().__init__(root, feature_norm, memory_budget)
        PlanetoidConfig(name=name).check()
        self.name = PLANETOID_NAMES[name.lower()]
        self.raw_dir = raw_dir

    @property
    def key(self) -> str:
        """The processed folder's name for this dataset and its options."""
        return PlanetoidConfig(name=self.name).key()

    @property
    def raw_files(self) -> list[str]:
        """The raw files this dataset needs."""
        return [f"ind.{self.name.lower()}.{part}" for part in PARTS]

    def process(self) -> GraphStore:
        """Read the raw files into a graph (called once; the result is saved and memory-mapped)."""
        candidates = raw_candidates(
            self.raw_dir, self.root, f"planetoid/{self.name}/raw", f"{self.name}/raw"
        )
        src = find_raw(candidates, self.raw_files, f"Planetoid {self.name}")
        return read_planetoid(src, self.key, source=str(src), split_name="public")


def read_planetoid(folder: Path, key: str, **meta: object) -> GraphStore:
    """The graph in the raw files ``folder/ind.<key>.*``, with the public split: the first
    ``len(y)`` vertices train, the next 500 validate, ``test.index`` tests."""
    def part(name: str) -> torch.Tensor:
        return torch.from_numpy(safe_pickle.dense(safe_pickle.load(folder / f"ind.{key}.{name}"))
                                ).to(torch.float)

    tx, allx, y, ty, ally = (part(n) for n in ("tx", "allx", "y", "ty", "ally"))
    graph = safe_pickle.load(folder / f"ind.{key}.graph")
    if not isinstance(graph, dict):
        raise ValueError(f"{folder / f'ind.{key}.graph'} must hold a dict of adjacency lists")
    test = torch.from_numpy(np.loadtxt(folder / f"ind.{key}.test.index", dtype=np.int64,
                                       ndmin=1))
    test_sorted = test.sort().values
    lo = int(test.min())
    if int(test.max()) - lo + 1 != tx.shape[0]:
        # CiteSeer: isolated test vertices have no row in tx/ty; they get zero rows
        tx, ty = (_spread(m, test_sorted - lo, int(test.max()) - lo + 1) for m in (tx, ty))
    feats = torch.cat([allx, tx])
    feats[test] = feats[test_sorted]  # rows of tx follow the sorted test ids
    labels = torch.cat([ally, ty]).max(dim=1)[1]
    labels[test] = labels[test_sorted]
    src = torch.tensor([v for v, nbrs in graph.items() for _ in nbrs], dtype=torch.long)
    dst = torch.tensor([u for nbrs in graph.values() for u in nbrs], dtype=torch.long)
    n, n_train = labels.numel(), y.shape[0]
    return GraphStore.from_edge_index(
        torch.stack([src, dst]), n, symmetrize=True, self_loops="remove",
        x=feats.contiguous(), y=labels, train_idx=torch.arange(n_train),
        val_idx=torch.arange(n_train, n_train + 500), test_idx=test_sorted,
        num_classes=int(ally.shape[1]), name=key, meta=dict(meta),
    )


def _spread(rows: torch.Tensor, at: torch.Tensor, n: int) -> torch.Tensor:
    out = torch.zeros(n, rows.shape[1], dtype=rows.dtype)
    out[at] = rows
    return out


