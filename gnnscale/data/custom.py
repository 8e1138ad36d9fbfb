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
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from gnnscale.data.base import Dataset, DatasetConfig
from gnnscale.data.checks import check_task
from gnnscale.data.convert import DatasetNotFoundError, index_split, ratio_split
from gnnscale.data.graph import GraphStore
from gnnscale.registry import register

SPLITS = ("train", "val", "test")


def memory_budget() -> int:
    """Bytes a user file may declare: half the host's physical memory."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def _npz_sizes(path: Path) -> dict[str, int]:
    """Bytes every array of an ``.npz`` declares in its header (nothing is loaded)."""
    sizes = {}
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            name = info.filename.removesuffix(".npy")
            with zf.open(info) as f:
                version = np.lib.format.read_magic(f)
                read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                        else np.lib.format.read_array_header_2_0)
                shape, _, dtype = read(f)
            if dtype.hasobject:
                raise ValueError(f"{path}: array {name!r} holds Python objects, which are never "
                                 "loaded from user files; save plain numeric arrays")
            sizes[name] = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
    return sizes


def read_npz(path: Path) -> dict:
    """The arrays of a user's ``.npz``, after checking that their declared sizes fit."""
    try:
        sizes = _npz_sizes(path)
        budget = memory_budget()
        if sum(sizes.values()) > budget:
            biggest = max(sizes, key=sizes.get)
            raise ValueError(f"{path}: its arrays declare {sum(sizes.values()) / 2**30:.1f} GiB "
                             f"(largest: {biggest!r}, {sizes[biggest] / 2**30:.1f} GiB), more "
                             f"than the {budget / 2**30:.1f} GiB allowed (half this host's "
                             "memory)")
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, OSError, EOFError, KeyError) as err:
        raise ValueError(f"{path}: not a readable .npz file (np.savez output expected: "
                         f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
                         ) from err


def read_graph_file(path: Path) -> dict:
    """The arrays of an ``.npz`` or a ``torch.save``d Data/dict, as a plain dict."""
    if path.suffix == ".npz":
        return read_npz(path)
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


def _num_nodes(arrays: dict, ei: torch.Tensor, x: torch.Tensor | None,
               y: torch.Tensor | None, path: Path) -> int:
    """The node count, checked against what backs it, before anything is allocated."""
    backed = {k: v.shape[0] for k, v in (("x", x), ("y", y)) if v is not None}
    if len(set(backed.values())) > 1:
        raise ValueError(f"{path}: x has {backed['x']} rows but y has {backed['y']} entries")
    claimed = arrays.get("num_nodes")
    if claimed is not None:
        claimed = int(np.asarray(claimed))
        if claimed < 0 or (backed and claimed != next(iter(backed.values()))):
            raise ValueError(f"{path}: num_nodes = {claimed} but "
                             + ", ".join(f"{k} has {v} rows" for k, v in backed.items())
                             + ": they must agree" if backed else f"{path}: num_nodes < 0")
    n = next(iter(backed.values())) if backed else claimed
    top = int(ei.max()) if ei.numel() else -1
    if ei.numel() and int(ei.min()) < 0:
        raise ValueError(f"{path}: edge_index holds negative ids ({int(ei.min())})")
    if n is None:
        n = top + 1
    if top >= n:
        raise ValueError(f"{path}: edge_index holds ids up to {top} but num_nodes = {n} (from "
                         f"{'x/y rows' if backed else 'num_nodes'}): ids must lie in "
                         "[0, num_nodes)")
    if not backed and n > max(2 * ei.shape[1], 1):
        raise ValueError(f"{path}: {n} nodes for {ei.shape[1]} edges and no x or y to back "
                         "them: number the nodes densely from 0, or give x")
    return n


def graph_from_arrays(arrays: dict, path: Path, symmetrize: bool, train_ratio: float,
                      val_ratio: float, split_seed: int) -> GraphStore:
    """Validate the arrays of a user file and build the GraphStore."""
    if "edge_index" not in arrays:
        raise ValueError(f"{path}: no 'edge_index' array (found {sorted(arrays)})")
    ei = _tensor(arrays["edge_index"], "edge_index", path)
    if ei.dim() != 2 or ei.shape[0] != 2:
        raise ValueError(f"{path}: edge_index must have shape [2, E], got {tuple(ei.shape)}")
    if ei.is_floating_point() or ei.dtype == torch.bool:
        raise ValueError(f"{path}: edge_index must hold integer ids, got {ei.dtype}")
    x = None if arrays.get("x") is None else _tensor(arrays["x"], "x", path).float()
    if x is not None and x.dim() == 1:
        x = x.reshape(-1, 1)
    y = None if arrays.get("y") is None else _tensor(arrays["y"], "y", path)
    if y is not None:
        if y.is_floating_point() and not torch.equal(y, y.round()):
            raise ValueError(f"{path}: y must hold integer class labels")
        y = y.reshape(-1).long()
    num_nodes = _num_nodes(arrays, ei, x, y, path)
    split, kinds = {}, {}
    for s in SPLITS:
        for suffix in ("mask", "idx"):
            if arrays.get(f"{s}_{suffix}") is not None:
                split[s] = _tensor(arrays[f"{s}_{suffix}"], f"{s}_{suffix}", path)
                kinds[s] = suffix
    try:
        if split:
            split = index_split({s: split.get(s) for s in SPLITS}, num_nodes, kinds)
        elif y is not None:
            split = ratio_split(y, train_ratio, val_ratio, split_seed)
        else:
            split = {s: None for s in SPLITS}
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from err
    if arrays.get("num_classes") is not None:
        num_classes = int(np.asarray(arrays["num_classes"]))
    else:
        num_classes = int(y.max()) + 1 if y is not None and y.numel() else 0
    try:
        return GraphStore.from_edge_index(
            ei, num_nodes, symmetrize=symmetrize, edge_weight=arrays.get("edge_weight"),
            x=x, y=y, train_idx=split["train"], val_idx=split["val"], test_idx=split["test"],
            num_classes=num_classes, name=path.stem,
            meta={"source": str(path), "inferred_classes": arrays.get("num_classes") is None},
        )
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: {err}") from err


class CustomDataset(Dataset):
    """A user's graph file (see the module docstring for the accepted contents)."""

    def __init__(self, root: str = "data", path: str | None = None, symmetrize: bool = True,
                 train_ratio: float = 0.6, val_ratio: float = 0.2, split_seed: int = 0,
                 feature_norm: str = "none") -> None:
        super().__init__(root, feature_norm)
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

    @property
    def source(self) -> str:
        return str(self.path)

    def check(self, graph: GraphStore) -> None:
        check_task(graph, self.source, inferred_classes=graph.meta.get("inferred_classes", False))

    def process(self) -> GraphStore:
        return graph_from_arrays(read_graph_file(self.path), self.path, self.symmetrize,
                                 self.train_ratio, self.val_ratio, self.split_seed)


@register("dataset", "custom")
@dataclass
class CustomConfig(DatasetConfig):
    """``dataset=custom dataset.path=FILE``."""

    _target_: str = "gnnscale.data.custom.CustomDataset"
    path: str | None = None
    symmetrize: bool = True
    train_ratio: float = 0.6
    val_ratio: float = 0.2
    split_seed: int = 0
