"""Bring your own graph: ``dataset=custom dataset.path=FILE``.

``FILE`` is either an ``.npz`` (``np.savez``) or a ``torch.save`` of a torch_geometric ``Data``
(or of a dict of tensors) with:

* ``edge_index`` ``[2, E]`` integer (row 0 = source, row 1 = destination), required;
* ``x`` ``[N, F]`` features, ``y`` ``[N]`` integer labels (-1 = unlabelled), optional;
* ``num_nodes`` (else taken from x, y or the largest id) and ``num_classes`` (else max y + 1);
* a split as ``train_mask``/``val_mask``/``test_mask`` (boolean ``[N]``) or
  ``train_idx``/``val_idx``/``test_idx`` (node ids); without one a seeded random split of the
  labelled nodes by ``train_ratio``/``val_ratio`` is made;
* ``edge_weight`` ``[E]``, optional.

The graph is symmetrized unless ``symmetrize=false``; repeated edges are merged.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from gnnscale.data.base import Dataset
from gnnscale.data.convert import DatasetNotFoundError, index_split, ratio_split
from gnnscale.data.graph import GraphStore
from gnnscale.registry import register

SPLITS = ("train", "val", "test")


def read_graph_file(path: Path) -> dict:
    """The arrays of an ``.npz`` or a ``torch.save``d Data/dict, as a plain dict."""
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    from torch_geometric.data import Data
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage

    with torch.serialization.safe_globals([Data, DataEdgeAttr, DataTensorAttr, GlobalStorage]):
        try:
            obj = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:
            raise ValueError(
                f"{path}: cannot read it as .npz or as a torch.save of a torch_geometric Data "
                f"or a dict of tensors ({type(err).__name__}: {str(err).splitlines()[0]})"
            ) from err
    if isinstance(obj, Data):
        out = {k: obj[k] for k in obj.keys()}
        out["num_nodes"] = obj.num_nodes
        return out
    if isinstance(obj, dict):
        return dict(obj)
    raise ValueError(f"{path} holds a {type(obj).__name__}: expected a torch_geometric Data "
                     "or a dict of arrays")


def _tensor(value, what: str, path: Path) -> torch.Tensor:
    try:
        return torch.as_tensor(np.asarray(value) if not torch.is_tensor(value) else value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: {what} is not an array ({err})") from err


def graph_from_arrays(arrays: dict, path: Path, symmetrize: bool, train_ratio: float,
                      val_ratio: float, split_seed: int) -> GraphStore:
    """Validate the arrays of a user file and build the GraphStore."""
    if "edge_index" not in arrays:
        raise ValueError(f"{path}: no 'edge_index' array (found {sorted(arrays)})")
    ei = _tensor(arrays["edge_index"], "edge_index", path)
    if ei.dim() != 2 or ei.shape[0] != 2:
        raise ValueError(f"{path}: edge_index must have shape [2, E], got {tuple(ei.shape)}")
    x = None if arrays.get("x") is None else _tensor(arrays["x"], "x", path).float()
    y = None if arrays.get("y") is None else _tensor(arrays["y"], "y", path)
    if y is not None:
        if y.is_floating_point() and not torch.equal(y, y.round()):
            raise ValueError(f"{path}: y must hold integer class labels")
        y = y.reshape(-1).long()
    if arrays.get("num_nodes") is not None:
        num_nodes = int(np.asarray(arrays["num_nodes"]))
    elif x is not None:
        num_nodes = x.shape[0]
    elif y is not None:
        num_nodes = y.numel()
    else:
        num_nodes = int(ei.max()) + 1 if ei.numel() else 0
    if x is not None and x.dim() == 1:
        x = x.reshape(-1, 1)
    split = {}
    for s in SPLITS:
        for suffix in ("mask", "idx"):
            if arrays.get(f"{s}_{suffix}") is not None:
                split[s] = _tensor(arrays[f"{s}_{suffix}"], f"{s}_{suffix}", path)
    if split:
        split = index_split({s: split.get(s) for s in SPLITS}, num_nodes)
    elif y is not None:
        split = ratio_split(y, train_ratio, val_ratio, split_seed)
    else:
        split = {s: None for s in SPLITS}
    if arrays.get("num_classes") is not None:
        num_classes = int(np.asarray(arrays["num_classes"]))
    else:
        num_classes = int(y.max()) + 1 if y is not None and y.numel() else 0
    try:
        return GraphStore.from_edge_index(
            ei, num_nodes, symmetrize=symmetrize, edge_weight=arrays.get("edge_weight"),
            x=x, y=y, train_idx=split["train"], val_idx=split["val"], test_idx=split["test"],
            num_classes=num_classes, name=path.stem, meta={"source": str(path)},
        )
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: {err}") from err


class CustomDataset(Dataset):
    """A user's graph file (see the module docstring for the accepted contents)."""

    def __init__(self, root: str = "data", path: str | None = None, symmetrize: bool = True,
                 train_ratio: float = 0.6, val_ratio: float = 0.2, split_seed: int = 0) -> None:
        super().__init__(root)
        if not path:
            raise ValueError("dataset=custom needs dataset.path=FILE (.npz or torch.save of Data)")
        self.path = Path(os.path.expanduser(str(path))).resolve()
        if not self.path.is_file():
            raise DatasetNotFoundError(
                f"custom dataset file {self.path} not found: save your graph there as .npz "
                "(edge_index, x, y, optional train/val/test masks) or with torch.save(Data)"
            )
        self.symmetrize = bool(symmetrize)
        self.train_ratio, self.val_ratio, self.split_seed = train_ratio, val_ratio, split_seed

    @property
    def key(self) -> str:
        st = self.path.stat()
        ident = [str(self.path), st.st_size, st.st_mtime_ns, self.symmetrize,
                 self.train_ratio, self.val_ratio, self.split_seed]
        digest = hashlib.blake2b(json.dumps(ident).encode(), digest_size=6).hexdigest()
        return f"custom-{self.path.stem}-{digest}"

    def process(self) -> GraphStore:
        return graph_from_arrays(read_graph_file(self.path), self.path, self.symmetrize,
                                 self.train_ratio, self.val_ratio, self.split_seed)


@register("dataset", "custom")
@dataclass
class CustomConfig:
    """``dataset=custom dataset.path=FILE``."""

    _target_: str = "gnnscale.data.custom.CustomDataset"
    root: str = "${data_root}"
    path: str | None = None
    symmetrize: bool = True
    train_ratio: float = 0.6
    val_ratio: float = 0.2
    split_seed: int = 0
