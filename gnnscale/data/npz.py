"""gnn-benchmark graphs (Shchur et al.): Amazon Computers/Photo, Coauthor CS/Physics.

Read from their npz files (looked up in ``raw_dir``, ``<root>/npz/<Name>/raw``,
``<root>/<Name>/raw``, then the shared datasets folder; read in place, never pickled objects)
into the graph PyG's ``Amazon`` / ``Coauthor`` build (the same bytes: tested): binary
bag-of-words features, self loops dropped, made undirected. The files carry no split: a seeded
random one takes ``train_per_class`` and ``val_per_class`` nodes of every class (Shchur et
al.'s 20 / 30) and puts every other node in test. ``largest_component=true`` first keeps the
largest connected component only, renumbered in id order (their ``standardize``: Amazon
Computers 13,752 -> 13,381 vertices, Photo 7,650 -> 7,487; the Coauthor graphs are connected).
A file is read only after the sizes its headers declare were checked (at most half this
host's memory, the dense features included); a damaged file is named.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import torch

from gnnscale.data.base import Dataset
from gnnscale.data.convert import (
    check_csr,
    csr_to_dense,
    find_raw,
    induced_subgraph,
    largest_component,
    memory_budget,
    per_class_split,
    raw_candidates,
    read_member,
    require_arrays,
    scan_npz,
    size_text,
)
from gnnscale.data.graph import GraphStore
from gnnscale.data.schemas import NPZ_GRAPHS, NpzConfig
from gnnscale.errors import ConfigError

ARRAYS = {"adj_data", "adj_indices", "adj_indptr", "adj_shape", "attr_data", "attr_indices",
          "attr_indptr", "attr_shape", "labels"}



class NpzDataset(Dataset):
    """One gnn-benchmark graph with a seeded per-class random split."""

    def __init__(self, root: str = "data", name: str = "computers", raw_dir: str | None = None,
                 train_per_class: int = 20, val_per_class: int = 30, split_seed: int = 0,
                 feature_norm: str = "none", largest_component: bool = False,
                 memory_budget: int | str | None = None) -> None:
        super().__init__(root, feature_norm, memory_budget)
        NpzConfig(name=name, train_per_class=train_per_class,
                  val_per_class=val_per_class).check()
        self.name = name.lower()
        self.raw_dir = raw_dir
        self.train_per_class, self.val_per_class = int(train_per_class), int(val_per_class)
        self.split_seed = int(split_seed)
        self.largest_component = bool(largest_component)

    @property
    def key(self) -> str:
        """The processed folder's name for this dataset and its options."""
        return NpzConfig(name=self.name, train_per_class=self.train_per_class,
                         val_per_class=self.val_per_class, split_seed=self.split_seed,
                         largest_component=self.largest_component).key()

    def process(self) -> GraphStore:
        """Read the raw files into a graph (called once; the result is saved and memory-mapped)."""
        collection, folder, raw_file = NPZ_GRAPHS[self.name]
        candidates = raw_candidates(self.raw_dir, self.root, f"npz/{folder}/raw", f"{folder}/raw")
        src = find_raw(candidates, [raw_file], f"{collection} {folder}")
        edges, x, y = read_npz(src / raw_file)
        if self.largest_component:
            keep = largest_component(edges, y.numel())
            edges, x, y = induced_subgraph(edges, y.numel(), keep), x[keep], y[keep]
        num_classes = int(y.max()) + 1
        split = per_class_split(y, num_classes, self.train_per_class, self.val_per_class,
                                self.split_seed)
        return GraphStore.from_edge_index(
            edges, y.numel(), symmetrize=True, self_loops="remove", x=x, y=y,
            train_idx=split["train"], val_idx=split["val"], test_idx=split["test"],
            num_classes=num_classes, name=self.name, meta={
                "source": str(src), "largest_component": self.largest_component,
                "split_name": f"{self.train_per_class}/"
                f"{self.val_per_class} per class, seed {self.split_seed}"})


def read_npz(path: Path) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(edge_index, x, y)`` of a gnn-benchmark file: every stored adjacency entry is an edge,
    features are 1 where the attribute count is positive."""
    budget = memory_budget()
    try:
        with zipfile.ZipFile(path) as zf:
            members = scan_npz(zf, path, budget, None, ARRAYS)
            require_arrays(members, ARRAYS, path, "gnn-benchmark npz")
            total = sum(m.nbytes for m in members.values())
            if total > budget:
                raise ConfigError(f"{path}: its arrays declare {size_text(total)}, more than "
                                  "half this host's memory")
            f = {name: read_member(zf, members[name], path) for name in ARRAYS}
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        raise ConfigError(f"{path}: not a readable .npz file ({type(err).__name__}: {err})"
                          ) from err
    try:
        rows, cols = (int(v) for v in f["attr_shape"].reshape(-1))
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{path}: attr_shape must hold 2 numbers, got {f['attr_shape']}"
                          ) from err
    if rows != f["labels"].size or rows < 0 or cols < 0:
        raise ConfigError(f"{path}: attr_shape {(rows, cols)} for {f['labels'].size} labels")
    dense = rows * cols * max(f["attr_data"].dtype.itemsize, 4)
    if dense > budget:
        raise ConfigError(f"{path}: attr_shape {(rows, cols)} makes dense features of "
                          f"{size_text(dense)}, more than half this host's memory")
    try:
        check_csr(f["adj_indptr"], f["adj_indices"], rows, "adjacency CSR arrays")
        x = torch.from_numpy(csr_to_dense(f["attr_data"], f["attr_indices"], f["attr_indptr"],
                                          (rows, cols))).to(torch.float)
    except ValueError as err:
        raise ConfigError(f"{path}: {err}") from err
    x[x > 0] = 1
    indptr, indices = f["adj_indptr"], f["adj_indices"]
    src = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    edges = torch.from_numpy(np.stack([src, indices.astype(np.int64)]))
    y = torch.from_numpy(f["labels"]).to(torch.long).reshape(-1)
    return edges, x.contiguous(), y


