"""OGB node property prediction (ogbn-arxiv, ogbn-products, ogbn-papers100M) from OGB's raw
folder layout, read without the ``ogb`` package.

Layout (``<dataset dir>`` = ``<root>/ogbn_<name>``, or the parent of ``raw_dir`` when given)::

    <dataset dir>/raw/edge.csv.gz           one "src,dst" row per edge (csv datasets)
    <dataset dir>/raw/node-feat.csv.gz      one row of floats per node
    <dataset dir>/raw/node-label.csv.gz     one class per node
    <dataset dir>/raw/num-node-list.csv.gz  the number of nodes
    <dataset dir>/raw/data.npz              papers100M: edge_index, node_feat, num_nodes_list
    <dataset dir>/raw/node-label.npz        papers100M: node_label (NaN = unlabelled)
    <dataset dir>/split/<type>/{train,valid,test}.csv.gz   one node id per row

Graphs are symmetrized (OGB stores products one way; arxiv and papers100M are citation graphs,
made undirected as usual for node classification; set ``symmetrize=false`` to keep them
directed). Unlabelled nodes get label -1.

While the dataset is processed the raw files are streamed (:mod:`gnnscale.data.bounded`): the
edge CSV parsed in blocks and spilled to disk once (or ``data.npz``'s ``edge_index`` read in
place), the CSC built from it out of core under ``dataset.memory_budget``, the features
parsed a block of rows at a time into the staged ``x.npy``; only the per-node arrays (labels,
splits, the CSC's offsets) are held whole.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import torch
from numpy.typing import DTypeLike

from gnnscale.data.base import Dataset
from gnnscale.data.bounded import EdgeSource, Stage, csv_rows, member_chunks
from gnnscale.data.convert import DatasetNotFoundError, find_raw, raw_candidates
from gnnscale.data.graph import GraphStore
from gnnscale.data.schemas import OGB_GRAPHS, OgbConfig

CSV_FILES = ["edge.csv.gz", "node-feat.csv.gz", "node-label.csv.gz", "num-node-list.csv.gz"]
BINARY_FILES = ["data.npz", "node-label.npz"]
SPLIT_FILES = ["train.csv.gz", "valid.csv.gz", "test.csv.gz"]


def read_csv(path: Path, dtype: DTypeLike) -> np.ndarray:
    """A headerless comma-separated (optionally gzipped) numeric table as a 2-D array."""
    try:
        return np.loadtxt(path, delimiter=",", dtype=dtype, ndmin=2)
    except ValueError as err:
        raise ValueError(f"{path}: not a headerless numeric CSV ({err})") from err


class OgbNodeDataset(Dataset):
    """An ``ogbn-*`` graph with its official split."""

    streams = True

    def __init__(self, root: str = "data", name: str = "arxiv", raw_dir: str | None = None,
                 symmetrize: bool = True, feature_norm: str = "none",
                 memory_budget: int | str | None = None) -> None:
        super().__init__(root, feature_norm, memory_budget)
        spec = OgbConfig(name=name)
        spec.check()
        self.name = key = spec.graph
        self.ogb_name, self.folder, self.split_type, self.num_classes, self.binary = \
            OGB_GRAPHS[key]
        self.raw_dir, self.symmetrize = raw_dir, bool(symmetrize)

    @property
    def key(self) -> str:
        """The processed folder's name for this dataset and its options."""
        return OgbConfig(name=self.name, symmetrize=self.symmetrize).key()

    def _locate(self) -> tuple[Path, Path]:
        """(raw folder, split folder)."""
        files = BINARY_FILES if self.binary else CSV_FILES
        raw = find_raw(
            raw_candidates(self.raw_dir, self.root, f"{self.folder}/raw", f"ogb/{self.folder}/raw"),
            files, self.ogb_name,
        )
        split_root = raw.parent / "split"
        split = split_root / self.split_type
        if not split.is_dir() and split_root.is_dir():
            subdirs = [d for d in split_root.iterdir() if d.is_dir()]
            split = subdirs[0] if len(subdirs) == 1 else split
        if not all((split / f).is_file() for f in SPLIT_FILES):
            raise DatasetNotFoundError(
                f"{self.ogb_name}: split files not found: expected {', '.join(SPLIT_FILES)} in "
                f"{split_root / self.split_type} (OGB layout: <dataset dir>/raw and "
                "<dataset dir>/split/<type>)"
            )
        return raw, split

    def _read_raw(self, raw: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """(edge_index [2, E], features, labels, num_nodes)."""
        if self.binary:
            with np.load(raw / "data.npz") as z:
                edge_index, x = z["edge_index"], z["node_feat"]
                num_nodes = int(np.asarray(z["num_nodes_list"]).sum())
            with np.load(raw / "node-label.npz") as z:
                label = z["node_label"]
        else:
            edge_index = read_csv(raw / "edge.csv.gz", np.int64).T
            x = read_csv(raw / "node-feat.csv.gz", np.float32)
            label = read_csv(raw / "node-label.csv.gz", np.float64)
            num_nodes = int(read_csv(raw / "num-node-list.csv.gz", np.int64).sum())
        label = np.asarray(label, dtype=np.float64).reshape(-1)
        y = np.where(np.isnan(label), -1, label).astype(np.int64)
        for what, arr in (("node features", x), ("node labels", y)):
            if arr.shape[0] != num_nodes:
                raise ValueError(f"{self.ogb_name}: {what} have {arr.shape[0]} rows for "
                                 f"{num_nodes} nodes (num-node-list)")
        return edge_index, x, y, num_nodes

    def _stream_raw(self, raw: Path, stage: Stage
                    ) -> tuple[EdgeSource, torch.Tensor, np.ndarray, int]:
        """:meth:`_read_raw` in bounded memory into :attr:`stage`: the edges an
        :class:`EdgeSource` (a CSV spilled to disk once, or the ``.npz`` member read in place)
        and the features streamed in row chunks into the staged ``x.npy``."""
        if self.binary:
            with np.load(raw / "node-label.npz") as z:
                label = z["node_label"]
            with zipfile.ZipFile(raw / "data.npz") as zf:
                info = {i.filename.removesuffix(".npy"): i for i in zf.infolist()}
                with zf.open(info["num_nodes_list"]) as f:
                    num_nodes = int(np.lib.format.read_array(f).sum())
                edges = EdgeSource.member(raw / "data.npz", info["edge_index"], "edge_index")
                with zf.open(info["node_feat"]) as f:
                    version = np.lib.format.read_magic(f)
                    shape = (np.lib.format.read_array_header_1_0 if version == (1, 0) else
                             np.lib.format.read_array_header_2_0)(f)[0]
                x = stage.features(member_chunks(zf, info["node_feat"],
                                                 chunk_bytes=stage.chunk_bytes),
                                   num_nodes, int(np.prod(shape[1:])))
        else:
            num_nodes = int(read_csv(raw / "num-node-list.csv.gz", np.int64).sum())
            label = read_csv(raw / "node-label.csv.gz", np.float64)
            edges = EdgeSource.csv(raw / "edge.csv.gz", stage.folder, "edge_index",
                                   block_bytes=min(1 << 20, stage.chunk_bytes))
            cols, rows = csv_rows(raw / "node-feat.csv.gz", "node features",
                                  block_bytes=min(1 << 20, stage.chunk_bytes))
            try:
                x = stage.features(rows, num_nodes, cols)
            except ValueError as err:
                raise ValueError(f"{self.ogb_name}: node features: {err} (num-node-list)"
                                 ) from None
        return edges, x, self._labels(label, num_nodes), num_nodes

    def _labels(self, label: np.ndarray, num_nodes: int) -> np.ndarray:
        """Labels as int64, -1 where unlabelled (NaN), one per node."""
        label = np.asarray(label, dtype=np.float64).reshape(-1)
        y = np.where(np.isnan(label), -1, label).astype(np.int64)
        if y.shape[0] != num_nodes:
            raise ValueError(f"{self.ogb_name}: node labels have {y.shape[0]} rows for "
                             f"{num_nodes} nodes (num-node-list)")
        return y

    def process(self) -> GraphStore:
        """Read the raw files into a graph (called once; the result is saved and memory-mapped):
        streamed in bounded memory while a dataset is loaded (:attr:`stage`), else whole."""
        raw, split_dir = self._locate()
        edge_index: EdgeSource | torch.Tensor
        if self.stage is not None:
            edge_index, x, y, num_nodes = self._stream_raw(raw, self.stage)
        else:
            edges, features, y, num_nodes = self._read_raw(raw)
            edge_index = torch.from_numpy(np.ascontiguousarray(edges))
            x = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))
        split = {}
        for s, f in zip(("train", "val", "test"), SPLIT_FILES):
            idx = read_csv(split_dir / f, np.int64).reshape(-1)
            if idx.size and (idx.min() < 0 or idx.max() >= num_nodes):
                raise ValueError(f"{split_dir / f}: node ids must lie in [0, {num_nodes})")
            split[f"{s}_idx"] = torch.from_numpy(np.sort(idx))
        return GraphStore.from_edge_index(
            edge_index, num_nodes, symmetrize=self.symmetrize, x=x,
            y=torch.from_numpy(y), num_classes=self.num_classes, name=self.ogb_name,
            meta={"source": str(raw), "split_name": split_dir.name}, stage=self.stage,
            train_idx=split["train_idx"], val_idx=split["val_idx"], test_idx=split["test_idx"],
        )


