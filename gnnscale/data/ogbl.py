"""OGB link property prediction (ogbl-collab, ogbl-ppa, ogbl-ddi, ogbl-citation2) from OGB's
raw folder layout, read without the ``ogb`` package; the published edge split goes into
``GraphStore.links`` (``task=link`` scores it as given).

Layout (``<dataset dir>`` = ``<root>/ogbl_<name>``, or the parent of ``raw_dir`` when given)::

    <dataset dir>/raw/edge.csv.gz           one "src,dst" row per edge (the training graph)
    <dataset dir>/raw/num-node-list.csv.gz  the number of nodes
    <dataset dir>/raw/node-feat.csv.gz      one row of floats per node (not ddi)
    <dataset dir>/split/<type>/{train,valid,test}.pt   the split, torch.save'd dicts

A split file holds ``edge`` ``[E, 2]`` (and ``edge_neg`` for valid/test: one pool of
negatives, scored by Hits@K) or, for citation2, ``source_node``, ``target_node`` ``[E]`` and
``target_node_neg`` ``[E, K]`` (each positive's own negatives, ranked for MRR). The ``.pt``
files are read with torch's weights-only loader (tensors and plain numpy arrays only: no code
runs). collab, ppa and ddi are undirected (both directions stored), citation2 directed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from gnnscale.data.base import Dataset
from gnnscale.data.convert import DatasetNotFoundError, find_raw, raw_candidates
from gnnscale.data.graph import GraphStore
from gnnscale.data.ogb import read_csv
from gnnscale.data.schemas import OGBL_GRAPHS
from gnnscale.errors import ConfigError

# option -> (OGB name, folder, split type, undirected)
GRAPHS = OGBL_GRAPHS  # option -> (OGB name, folder, split type, undirected)
RAW_FILES = ["edge.csv.gz", "num-node-list.csv.gz"]
SPLIT_FILES = {"train": "train.pt", "val": "valid.pt", "test": "test.pt"}


def _numpy_globals() -> list:
    """What a weights-only load may rebuild besides tensors: plain numpy arrays."""
    import numpy.core.multiarray as multiarray

    kinds = [type(np.dtype(t)) for t in (np.int64, np.int32, np.float64, np.float32, np.bool_)]
    return [multiarray._reconstruct, np.ndarray, np.dtype, *kinds]


def read_split_file(path: Path) -> dict[str, np.ndarray]:
    """A ``torch.save``d dict of arrays, loaded weights-only, as numpy arrays."""
    with torch.serialization.safe_globals(_numpy_globals()):
        try:
            obj = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:
            raise ConfigError(f"{path}: not a torch.save'd dict of arrays ({type(err).__name__}:"
                              f" {str(err).splitlines()[0] if str(err) else ''})") from err
    if not isinstance(obj, dict):
        raise ConfigError(f"{path} holds a {type(obj).__name__}: expected a dict of arrays")
    return {k: v.numpy() if torch.is_tensor(v) else np.asarray(v) for k, v in obj.items()}


def split_edges(part: dict[str, np.ndarray], path: Path) -> dict[str, torch.Tensor]:
    """``{"pos": [2, E], "neg": [2, Q]}`` (``neg`` when present) of one split file."""
    out = {}
    if "edge" in part:
        out["pos"] = torch.from_numpy(np.asarray(part["edge"], dtype=np.int64).reshape(-1, 2).T)
        if "edge_neg" in part:
            out["neg"] = torch.from_numpy(
                np.asarray(part["edge_neg"], dtype=np.int64).reshape(-1, 2).T)
    elif "source_node" in part and "target_node" in part:
        src = torch.from_numpy(np.asarray(part["source_node"], dtype=np.int64).reshape(-1))
        dst = torch.from_numpy(np.asarray(part["target_node"], dtype=np.int64).reshape(-1))
        out["pos"] = torch.stack([src, dst])
        if "target_node_neg" in part:
            neg = torch.from_numpy(np.asarray(part["target_node_neg"], dtype=np.int64))
            neg = neg.reshape(src.numel(), -1)
            out["neg"] = torch.stack([src.repeat_interleave(neg.shape[1]), neg.reshape(-1)])
    else:
        raise ConfigError(f"{path}: expected 'edge' (and 'edge_neg') or 'source_node', "
                          f"'target_node' (and 'target_node_neg'), found {sorted(part)}")
    return out


class OgbLinkDataset(Dataset):
    """An ``ogbl-*`` graph with its published edge split in ``links``."""

    def __init__(self, root: str = "data", name: str = "collab", raw_dir: str | None = None,
                 symmetrize: bool | None = None, feature_norm: str = "none",
                 memory_budget: int | str | None = None) -> None:
        super().__init__(root, feature_norm, memory_budget)
        key = name.lower().removeprefix("ogbl-").removeprefix("ogbl_")
        if key not in GRAPHS:
            raise ValueError(f"unknown OGB link dataset {name!r}; choose one of {list(GRAPHS)}")
        self.name = key
        self.ogb_name, self.folder, self.split_type, undirected = GRAPHS[key]
        self.raw_dir = raw_dir
        self.symmetrize = undirected if symmetrize is None else bool(symmetrize)

    @property
    def key(self) -> str:
        """The processed folder's name for this dataset and its options."""
        return f"ogbl-{self.name}" + ("-sym" if self.symmetrize else "")

    def _locate(self) -> tuple[Path, Path]:
        raw = find_raw(raw_candidates(self.raw_dir, self.root, f"{self.folder}/raw",
                                      f"ogb/{self.folder}/raw"), RAW_FILES, self.ogb_name)
        split_root = raw.parent / "split"
        split = split_root / self.split_type
        if not split.is_dir() and split_root.is_dir():
            subdirs = [d for d in split_root.iterdir() if d.is_dir()]
            split = subdirs[0] if len(subdirs) == 1 else split
        if not all((split / f).is_file() for f in SPLIT_FILES.values()):
            raise DatasetNotFoundError(
                f"{self.ogb_name}: split files not found: expected "
                f"{', '.join(SPLIT_FILES.values())} in {split_root / self.split_type} (OGB "
                "layout: <dataset dir>/raw and <dataset dir>/split/<type>)")
        return raw, split

    def process(self) -> GraphStore:
        """Read the raw files and the split (called once; saved and memory-mapped after)."""
        raw, split_dir = self._locate()
        edge_index = read_csv(raw / "edge.csv.gz", np.int64).T
        num_nodes = int(read_csv(raw / "num-node-list.csv.gz", np.int64).sum())
        x = None
        if (raw / "node-feat.csv.gz").is_file():
            x = torch.from_numpy(np.ascontiguousarray(read_csv(raw / "node-feat.csv.gz",
                                                               np.float32)))
        links = {}
        for s, f in SPLIT_FILES.items():
            edges = split_edges(read_split_file(split_dir / f), split_dir / f)
            for kind, e in edges.items():
                if s == "train" and kind == "neg":
                    continue
                links[f"{s}_{kind}"] = e
        try:
            return GraphStore.from_edge_index(
                torch.from_numpy(np.ascontiguousarray(edge_index)), num_nodes,
                symmetrize=self.symmetrize, x=x, name=self.ogb_name, links=links,
                meta={"source": str(raw), "split_name": split_dir.name})
        except ValueError as err:
            raise ConfigError(f"{self.ogb_name} ({raw}): {err}") from err
