"""ogbn-mag from OGB's raw heterogeneous layout (``dataset=ogbn_mag``), read without the ``ogb``
package, for users who have the files (nothing is downloaded).

Layout (``<dataset dir>`` = ``<root>/ogbn_mag``, or the parent of ``raw_dir`` when given)::

    <dataset dir>/raw/num-node-dict.csv.gz         a header of node types, a row of counts
    <dataset dir>/raw/triplet-type-list.csv.gz     one "source,relation,destination" per row
    <dataset dir>/raw/relations/<s>___<r>___<d>/edge.csv.gz       "src,dst" per edge
    <dataset dir>/raw/relations/<s>___<r>___<d>/edge-feat.csv.gz  optional edge features
    <dataset dir>/raw/node-feat/<type>/node-feat.csv.gz           features of featured types
    <dataset dir>/raw/node-label/<type>/node-label.csv.gz         labels of target types
    <dataset dir>/split/time/<type>/{train,valid,test}.csv.gz     one local id per row

Node and edge types are in OGB's order (sorted): author 1,134,649, field_of_study 59,965,
institution 8,740, paper 736,389 (128 features, 349 classes, the only target); edge types
(author, affiliated_with, institution), (author, writes, paper), (paper, cites, paper),
(paper, has_topic, field_of_study), and with ``add_reverse`` (the default) a ``rev_`` type
for each. The time split: 629,571 / 64,879 / 41,939 papers.
"""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import numpy as np
import torch

from gnnscale.data.base import Dataset
from gnnscale.data.convert import DatasetNotFoundError, find_raw, raw_candidates
from gnnscale.data.graph import GraphStore
from gnnscale.data.ogb import SPLIT_FILES, read_csv
from gnnscale.data.schemas import OgbMagConfig

NAME = "ogbn-mag"
FOLDER = "ogbn_mag"
TRIPLETS = (("author", "affiliated_with", "institution"), ("author", "writes", "paper"),
            ("paper", "cites", "paper"), ("paper", "has_topic", "field_of_study"))
REQUIRED = ["num-node-dict.csv.gz", "triplet-type-list.csv.gz",
            "node-feat/paper/node-feat.csv.gz", "node-label/paper/node-label.csv.gz",
            *(f"relations/{'___'.join(t)}/edge.csv.gz" for t in TRIPLETS)]
SPLIT_TYPE = "time"


def _text_rows(path: Path) -> list[list[str]]:
    """The rows of a small gzipped CSV file, as text."""
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        return [row for row in csv.reader(f) if row]


def read_mag(raw: Path, split: Path, add_reverse: bool) -> GraphStore:
    """The typed graph in OGB's heterogeneous raw layout (see the module docstring)."""
    header = _text_rows(raw / "num-node-dict.csv.gz")
    if len(header) < 2 or len(header[0]) != len(header[1]):
        raise ValueError(f"{raw / 'num-node-dict.csv.gz'}: a header of node types and a row "
                         "of counts expected")
    counts = {t: int(c) for t, c in sorted(zip(header[0], header[1]))}
    triplets = sorted(tuple(r) for r in _text_rows(raw / "triplet-type-list.csv.gz"))
    edges, edge_attr = {}, {}
    for et in triplets:
        if len(et) != 3:
            raise ValueError(f"{raw / 'triplet-type-list.csv.gz'}: row {list(et)} is not "
                             "source,relation,destination")
        folder = raw / "relations" / "___".join(et)
        if not (folder / "edge.csv.gz").is_file():
            raise DatasetNotFoundError(f"{NAME}: {folder / 'edge.csv.gz'} not found, but "
                                       "triplet-type-list.csv.gz names that edge type")
        edges[et] = torch.from_numpy(np.ascontiguousarray(read_csv(folder / "edge.csv.gz",
                                                                   np.int64).T))
        if (folder / "edge-feat.csv.gz").is_file():
            edge_attr[et] = torch.from_numpy(read_csv(folder / "edge-feat.csv.gz", np.float32))
    feats: dict[str, torch.Tensor] = {}
    labels: dict[str, torch.Tensor] = {}
    splits: dict[str, dict[str, torch.Tensor]] = {"train_idx": {}, "val_idx": {},
                                                  "test_idx": {}}
    for t in counts:
        f = raw / "node-feat" / t / "node-feat.csv.gz"
        if f.is_file():
            feats[t] = torch.from_numpy(read_csv(f, np.float32))
        f = raw / "node-label" / t / "node-label.csv.gz"
        if not f.is_file():
            continue
        label = read_csv(f, np.float64).reshape(-1)
        labels[t] = torch.from_numpy(np.where(np.isnan(label), -1, label).astype(np.int64))
        for s, name in zip(("train_idx", "val_idx", "test_idx"), SPLIT_FILES):
            if not (split / t / name).is_file():
                raise DatasetNotFoundError(f"{NAME}: split file {split / t / name} not found "
                                           f"(OGB layout: <dataset dir>/split/{SPLIT_TYPE}/<type>)")
            splits[s][t] = torch.from_numpy(np.sort(read_csv(split / t / name,
                                                             np.int64).reshape(-1)))
    return GraphStore.from_typed(counts, edges, features=feats, y=labels,
                                 edge_attr=edge_attr or None, add_reverse=add_reverse,
                                 name=NAME, meta={"source": str(raw), "split_name": SPLIT_TYPE},
                                 train_idx=splits["train_idx"], val_idx=splits["val_idx"],
                                 test_idx=splits["test_idx"])


class OgbMagDataset(Dataset):
    """ogbn-mag with its time split."""

    def __init__(self, root: str = "data", raw_dir: str | None = None, add_reverse: bool = True,
                 feature_norm: str = "none",
                 memory_budget: int | str | None = None) -> None:
        super().__init__(root, feature_norm, memory_budget)
        self.spec = OgbMagConfig(raw_dir=raw_dir, add_reverse=add_reverse)
        self.spec.check()

    @property
    def key(self) -> str:
        """The processed folder's name for this dataset and its options."""
        return self.spec.key()

    def process(self) -> GraphStore:
        """Read the raw files into a graph (called once; the result is saved and memory-mapped)."""
        raw = find_raw(raw_candidates(self.spec.raw_dir, self.root, f"{FOLDER}/raw",
                                      f"ogb/{FOLDER}/raw"), REQUIRED, NAME)
        return read_mag(raw, raw.parent / "split" / SPLIT_TYPE, bool(self.spec.add_reverse))
