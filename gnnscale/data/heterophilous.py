"""Heterophilous benchmark graphs (Platonov et al.), e.g. Tolokers.

The npz ``<name>.npz`` is looked up in ``raw_dir``, ``<root>/heterophilous/<name>/raw``,
``<root>/<name>/raw`` and the shared datasets folder and read in place (arrays only, never
pickled objects), into the graph PyG's ``HeterophilousGraphDataset`` builds (the same bytes:
tested): the edges made undirected. The graphs come with 10 fixed splits; ``split`` picks one.
"""

from __future__ import annotations

import numpy as np
import torch

from gnnscale.data.base import Dataset
from gnnscale.data.convert import find_raw, index_split, raw_candidates, require_arrays
from gnnscale.data.graph import GraphStore
from gnnscale.data.schemas import HeterophilousConfig


class HeterophilousDataset(Dataset):
    """``HeterophilousGraphDataset(root, name)`` with fixed split number ``split``."""

    def __init__(self, root: str = "data", name: str = "tolokers", raw_dir: str | None = None,
                 split: int = 0, feature_norm: str = "none",
                 memory_budget: int | str | None = None) -> None:
        super().__init__(root, feature_norm, memory_budget)
        spec = HeterophilousConfig(name=name, split=split)
        spec.check()
        self.name = spec.graph
        self.raw_dir, self.split = raw_dir, int(split)

    @property
    def key(self) -> str:
        """The processed folder's name for this dataset and its options."""
        return HeterophilousConfig(name=self.name, split=self.split).key()

    def process(self) -> GraphStore:
        """Read the raw files into a graph (called once; the result is saved and memory-mapped)."""
        raw_file = f"{self.name}.npz"
        candidates = raw_candidates(
            self.raw_dir, self.root, f"heterophilous/{self.name}/raw", f"{self.name}/raw"
        )
        src = find_raw(candidates, [raw_file], f"heterophilous graph {self.name}")
        with np.load(src / raw_file, allow_pickle=False) as f:
            require_arrays(f, {"node_features", "node_labels", "edges", "train_masks",
                               "val_masks", "test_masks"}, src / raw_file,
                           "heterophilous-benchmark")
            x = torch.from_numpy(f["node_features"]).float().contiguous()
            y = torch.from_numpy(f["node_labels"]).long().reshape(-1)
            edges = torch.from_numpy(f["edges"]).long().t()
            split = {s: torch.from_numpy(f[f"{s}_masks"][self.split]).bool()
                     for s in ("train", "val", "test")}
        idx = index_split(split, y.numel())
        return GraphStore.from_edge_index(
            edges, y.numel(), symmetrize=True, x=x, y=y, train_idx=idx["train"],
            val_idx=idx["val"], test_idx=idx["test"], num_classes=int(y.max()) + 1,
            name=self.name, meta={"source": str(src), "split_name": f"fixed split {self.split}"})


