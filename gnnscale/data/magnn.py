"""MAGNN's typed graphs, DBLP and IMDB (``dataset=dblp``, ``dataset=imdb``), read from the raw
files PyG's ``DBLP`` and ``IMDB`` read, without PyG's dataset classes.

Raw files (``<dataset dir>/raw``; ``<dataset dir>`` is looked up as ``raw_dir``'s parent, else
``<root>/<DBLP|IMDB>``, ``<root>/hetero/<DBLP|IMDB>``, then the shared datasets folder)::

    adjM.npz                   scipy CSR adjacency over all nodes, types in id order
    features_<i>.npz / .npy    features of node type i (CSR, or dense for DBLP's terms)
    labels.npy                 a class per target node (DBLP: author, IMDB: movie)
    train_val_test_idx.npz     MAGNN's split (400 / 400 / rest), target-local ids
    node_types.npy             DBLP: the node type of every id (gives the conference count)

Node types, in id order: DBLP author (334 features), paper (4,231), term (50), conference
(none); IMDB movie, director, actor (3,066 each, so one ``x``). Every non-empty block of the
adjacency between two node types is an edge type ``(source, "to", destination)``, as PyG
names them (the files hold both directions). ``split=hgb`` (DBLP) reads HGB's split from
``<dataset dir>/hgb_split/label.dat`` (training authors; ``val_ratio`` of them, seeded, are
held out for validation, as HGB's code does) and ``label.dat.test``. Files are read with
``allow_pickle=False`` (scipy's ``load_npz`` and numpy's ``load``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

from gnnscale.data.base import SpecDataset
from gnnscale.data.convert import DatasetNotFoundError, find_raw, raw_candidates
from gnnscale.data.graph import GraphStore
from gnnscale.data.schemas import MAGNN_GRAPHS, MagnnConfig
from gnnscale.data.typed_splits import hold_out, ids_of

#: option -> (node types in id order, feature file per featured type, target type)
SCHEMAS = {
    "dblp": (("author", "paper", "term", "conference"),
             {"author": "features_0.npz", "paper": "features_1.npz", "term": "features_2.npy"},
             "author"),
    "imdb": (("movie", "director", "actor"),
             {"movie": "features_0.npz", "director": "features_1.npz",
              "actor": "features_2.npz"}, "movie"),
}
COMMON = ("adjM.npz", "labels.npy", "train_val_test_idx.npz")
HGB_SPLIT = ("label.dat", "label.dat.test")


def _features(path: Path) -> np.ndarray:
    """A feature file as a dense float32 matrix (PyG's ``todense()`` then ``float``)."""
    if path.suffix == ".npy":
        return np.load(path, allow_pickle=False).astype(np.float32)
    return np.asarray(sp.load_npz(path).todense()).astype(np.float32)


def read_hgb_labels(path: Path, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(local ids, labels)`` of an HGB ``label.dat``: ``id<TAB>name<TAB>type<TAB>label``."""
    ids, labels = [], []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            parts = line.rstrip("\n").split("\t")
            try:
                ids.append(int(parts[0]))
                labels.append(int(parts[3]))
            except (IndexError, ValueError):
                raise ValueError(f"{path}:{n}: expected 'id<TAB>name<TAB>type<TAB>label', got "
                                 f"{line.strip()[:80]!r}") from None
    ids_of(np.asarray(ids, dtype=np.int64), count, str(path))  # in range
    return torch.tensor(ids, dtype=torch.int64), torch.tensor(labels, dtype=torch.int64)


class MagnnDataset(SpecDataset):
    """DBLP or IMDB as a typed graph, with MAGNN's split (or HGB's, for DBLP)."""

    def __init__(self, root: str = "data", name: str = "dblp", raw_dir: str | None = None,
                 split: str = "magnn", val_ratio: float = 0.2, split_seed: int = 0,
                 feature_norm: str = "none",
                 memory_budget: int | str | None = None) -> None:
        spec = MagnnConfig(name=name, raw_dir=raw_dir, split=split, val_ratio=val_ratio,
                           split_seed=split_seed)
        super().__init__(root, feature_norm, spec, memory_budget)

    def _locate(self) -> Path:
        folder = MAGNN_GRAPHS[self.name][0]
        _, feats, _ = SCHEMAS[self.name]
        files = [*COMMON, *feats.values()] + (["node_types.npy"] if self.name == "dblp" else [])
        return find_raw(raw_candidates(self.spec.raw_dir, self.root, f"{folder}/raw",
                                       f"hetero/{folder}/raw"), files, f"MAGNN {folder}")

    def process(self) -> GraphStore:
        """Read the raw files into a graph (called once; the result is saved and memory-mapped)."""
        raw = self._locate()
        node_types, feat_files, target = SCHEMAS[self.name]
        feats = {t: torch.from_numpy(_features(raw / f)) for t, f in feat_files.items()}
        counts = {t: feats[t].shape[0] if t in feats else 0 for t in node_types}
        if self.name == "dblp":  # conferences have no features: their count is in node_types
            kinds = np.load(raw / "node_types.npy", allow_pickle=False).reshape(-1)
            counts["conference"] = int((kinds == 3).sum())
        adj = sp.load_npz(raw / "adjM.npz").tocsr()
        total = sum(counts.values())
        if adj.shape != (total, total):
            raise ValueError(f"{raw / 'adjM.npz'}: shape {adj.shape}, but the node types hold "
                             f"{total} nodes ({counts})")
        start = dict(zip(node_types, np.cumsum([0, *counts.values()]).tolist()))
        edges = {}
        for s in node_types:
            for d in node_types:
                block = adj[start[s]:start[s] + counts[s], start[d]:start[d] + counts[d]].tocoo()
                if block.nnz:
                    edges[(s, "to", d)] = torch.from_numpy(
                        np.stack([block.row, block.col]).astype(np.int64))
        y = torch.from_numpy(np.load(raw / "labels.npy", allow_pickle=False).astype(np.int64))
        split, split_name = self._split(raw, counts[target], y)
        return GraphStore.from_typed(
            counts, edges, features=feats, y={target: y}, **split,
            name=self.name, meta={"source": str(raw), "split_name": split_name})

    def _split(self, raw: Path, count: int, y: torch.Tensor) -> tuple[dict, str]:
        """``{train_idx: {target: ids}, ...}`` and the split's name."""
        target = SCHEMAS[self.name][2]
        if self.spec.split == "magnn":
            with np.load(raw / "train_val_test_idx.npz", allow_pickle=False) as z:
                ids = {s: ids_of(z[f"{s}_idx"], count, f"{raw}/train_val_test_idx.npz {s}_idx")
                       for s in ("train", "val", "test")}
            return {f"{s}_idx": {target: ids[s]} for s in ids}, "MAGNN 400/400/rest"
        folder = raw.parent / "hgb_split"
        if not all((folder / f).is_file() for f in HGB_SPLIT):
            raise DatasetNotFoundError(
                f"DBLP split=hgb: {', '.join(HGB_SPLIT)} not found in {folder} (HGB's DBLP "
                "split, beside the raw folder; ../shared/datasets/hetero/DBLP/hgb_split has "
                "them)")
        train, train_y = read_hgb_labels(folder / "label.dat", count)
        test, test_y = read_hgb_labels(folder / "label.dat.test", count)
        for given, labels, f in ((train, train_y, "label.dat"),
                                 (test, test_y, "label.dat.test")):
            if not torch.equal(y[given], labels):
                raise ValueError(f"{folder / f}: its labels disagree with {raw / 'labels.npy'} "
                                 "(HGB's DBLP numbers authors as MAGNN's does)")
        train, val = hold_out(torch.sort(train).values, self.spec.val_ratio,
                              self.spec.split_seed)
        return ({"train_idx": {target: train}, "val_idx": {target: val},
                 "test_idx": {target: torch.sort(test).values}},
                f"HGB, val {self.spec.val_ratio:g} of train, seed {self.spec.split_seed}")
