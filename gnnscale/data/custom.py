"""Bring your own graph: ``dataset=custom dataset.path=FILE``.

A typed graph is an ``.npz`` in the typed layout (member names joined with ``__``) or a
``torch.save`` of a torch_geometric ``HeteroData``: :mod:`gnnscale.data.typed_input` reads
those. Otherwise ``FILE`` is either an ``.npz`` (``np.savez``) or a ``torch.save`` of a
torch_geometric ``Data`` (or of a dict of tensors) with:

* ``edge_index`` ``[2, E]`` integer (row 0 = source, row 1 = destination), required;
* ``x`` ``[N, F]`` features, ``y`` ``[N]`` integer labels (-1 = unlabelled), optional;
* ``num_nodes`` (else taken from x, y or the largest id) and ``num_classes`` (else max y + 1);
* a split as ``train_mask``/``val_mask``/``test_mask`` (boolean ``[N]``) or
  ``train_idx``/``val_idx``/``test_idx`` (node ids); without one a seeded random split of the
  labelled nodes by ``train_ratio``/``val_ratio`` is made;
* ``edge_weight`` ``[E]`` and ``edge_attr`` ``[E, D]`` edge features, optional;
* a link-prediction split, optional (``task=link`` scores it as given): ``train_pos``,
  ``val_pos``, ``test_pos`` and, optionally, ``val_neg``, ``test_neg``, each ``[2, E]``
  integer node ids (row 0 source, row 1 target); negatives with ``k`` consecutive columns per
  positive, each with its positive's source, are ranked per positive for MRR.

The graph is symmetrized unless ``symmetrize=false``; repeated edges are merged.

A hostile or broken file fails with a message, not by exhausting memory: an ``.npz`` is read
member by member only after the sizes its zip entries and ``.npy`` headers declare were
checked against ``dataset.max_member_gb`` (each), half this host's memory (together) and the
graph they describe (x, y and the masks agree on the node count; edges, ids and weights are
bounded by it); a truncated or forged member is named. ``num_classes`` must exceed the
largest label and be at most ``max(1000, 10 * (largest label + 1))``.

While the dataset is processed an ``.npz``'s ``x`` is streamed in row chunks and its
``edge_index`` read in chunks by the CSC build, never whole (:mod:`gnnscale.data.bounded`); a
``torch.save`` file is loaded whole, so one larger than ``dataset.memory_budget`` is refused
in one line before it is read.
"""

from __future__ import annotations

import math
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnscale.data.base import Dataset
from gnnscale.data.bounded import EdgeSource, RowSource, Stage, member_chunks
from gnnscale.data.checks import check_num_classes, check_task
from gnnscale.data.convert import (
    DatasetNotFoundError,
    NpzMember,
    gib_text,
    index_split,
    memory_budget,
    ratio_split,
    read_member,
    scan_npz,
    size_text,
)
from gnnscale.data.graph import LINK_ARRAYS, GraphStore
from gnnscale.data.schemas import CustomConfig
from gnnscale.errors import ConfigError

SPLITS = ("train", "val", "test")
SCALARS = ("num_nodes", "num_classes")
SPLIT_ARRAYS = tuple(f"{s}_{kind}" for s in SPLITS for kind in ("mask", "idx"))
KNOWN = ("edge_index", "x", "y", "edge_weight", "edge_attr", *SCALARS, *SPLIT_ARRAYS,
         *LINK_ARRAYS)
CEILING_KEY = "dataset.max_member_gb"
INT64_MAX = np.iinfo(np.int64).max


def _refuse_member(members: dict[str, NpzMember], name: str, path: Path, problem: str) -> None:
    raise ConfigError(f"{path}: {problem}; nothing was read (member {name!r} declares "
                      f"{size_text(members[name].nbytes)})")


def _check_declared(members: dict[str, NpzMember], claimed: int | None, path: Path) -> None:
    """Refuse, from the headers alone, members whose shapes the graph they describe does not
    back: x, y and the masks must agree on the node count (``claimed``: num_nodes, when
    given), ids and edge weights are bounded by it, and the edges by the node pairs."""
    def refuse(name: str, problem: str) -> None:
        _refuse_member(members, name, path, problem)

    shape = {name: m.shape for name, m in members.items()}
    num_edges = shape["edge_index"][1] if "edge_index" in shape else None
    if "x" in shape and "y" in shape and shape["x"][0] != math.prod(shape["y"]):
        big = max(("x", "y"), key=lambda n: members[n].nbytes)
        refuse(big, f"x has {shape['x'][0]} rows but y has {math.prod(shape['y'])} entries")
    backed = shape["x"][0] if "x" in shape else math.prod(shape["y"]) if "y" in shape else None
    n = backed if backed is not None else claimed
    if claimed is not None and backed is not None and claimed != backed:
        refuse("x" if "x" in shape else "y", f"num_nodes = {claimed} but "
               f"{'x has' if 'x' in shape else 'y has'} {backed} rows: they must agree")
    if num_edges is not None and n is not None and num_edges > max(n * n, 1 << 20):
        refuse("edge_index", f"edge_index declares {num_edges} edges for {n} nodes, more than "
               f"the {n * n} ordered pairs of nodes")
    for name in LINK_ARRAYS:
        if name in shape and n is not None and shape[name][1] > max(n * n, 1 << 20):
            refuse(name, f"{name} declares {shape[name][1]} edges for {n} nodes, more than "
                   f"the {n * n} ordered pairs of nodes")
    top = n if n is not None else max(2 * (num_edges or 0), 1)  # the ids must be dense then
    for name in SPLIT_ARRAYS:
        if name not in shape:
            continue
        entries = math.prod(shape[name])
        if name.endswith("_mask") and n is not None and entries != n:
            refuse(name, f"{name} has {entries} entries for {n} nodes")
        if entries > top:
            refuse(name, f"{name} has {entries} entries for at most {top} nodes")
    if "edge_attr" in shape and num_edges is not None and (
            not shape["edge_attr"] or shape["edge_attr"][0] != num_edges):
        refuse("edge_attr", f"edge_attr has shape {shape['edge_attr']}: {num_edges} rows "
               "expected, one per edge")
    if "edge_weight" in shape and num_edges is not None \
            and math.prod(shape["edge_weight"]) != num_edges:
        refuse("edge_weight", f"edge_weight has {math.prod(shape['edge_weight'])} entries for "
               f"{num_edges} edges")


def read_npz(path: Path, max_member_bytes: int = 64 << 30, stage: Stage | None = None
             ) -> dict:
    """The arrays of a user's ``.npz``, read only after every member's declared size was
    checked: against ``max_member_bytes`` (``dataset.max_member_gb``), half this host's
    memory (all of them), and the shapes the graph they describe backs. Only the arrays the
    loader uses are read. With a ``stage`` (while a dataset is processed) ``x`` is streamed
    in row chunks into its staging folder (float32, memory-mapped), never held whole, and
    does not count against the memory check."""
    try:
        with zipfile.ZipFile(path) as zf:
            members = scan_npz(zf, path, max_member_bytes, CEILING_KEY, KNOWN)
            streamed = {"x", "edge_index", "edge_attr"} & set(members) if stage is not None \
                else set()
            total = sum(m.nbytes for n, m in members.items() if n not in streamed)
            budget = memory_budget()
            if total > budget:
                biggest = max(members, key=lambda n: members[n].nbytes)
                raise ConfigError(
                    f"{path}: its arrays declare {total / 2**30:.1f} GiB (largest: {biggest!r}, "
                    f"{members[biggest].nbytes / 2**30:.1f} GiB), more than the "
                    f"{budget / 2**30:.1f} GiB allowed (half this host's memory)")
            for name, m in members.items():
                _check_shape(name, m.shape, m.dtype, path, refuse=lambda problem, n=name:
                             _refuse_member(members, n, path, problem))
            out: dict[str, Any] = {name: read_member(zf, members[name], path)
                                   for name in SCALARS if name in members}
            claimed = out.get("num_nodes")
            _check_declared(members, None if claimed is None else
                            _scalar(claimed, "num_nodes", path), path)
            out.update({name: read_member(zf, m, path) for name, m in members.items()
                        if name not in out and name not in streamed})
            if "edge_index" in streamed:  # read in chunks by the CSC build, never whole
                out["edge_index"] = EdgeSource.member(path, members["edge_index"].info,
                                                      "edge_index")
            if "edge_attr" in streamed:  # rows moved with their edges, a chunk at a time
                out["edge_attr"] = RowSource(path, members["edge_attr"].info, "edge_attr")
            if "x" in streamed and stage is not None:
                x = members["x"]
                rows, cols = x.shape[0], math.prod(x.shape[1:])
                try:
                    out["x"] = stage.features(member_chunks(zf, x.info,
                                                            chunk_bytes=stage.chunk_bytes),
                                              rows, cols)
                except ConfigError as err:  # NaN/Inf values, found while streaming
                    raise ConfigError(f"{path}: {err}") from None
                except (ValueError, EOFError, zlib.error) as err:
                    raise ConfigError(f"{path}: member 'x' cannot be read ({err}): the file is "
                                      "damaged; write it again with np.savez") from err
            return out
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        raise ConfigError(f"{path}: not a readable .npz file (np.savez output expected: "
                          f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
                          ) from err


def _check_zip_sizes(path: Path, max_member_bytes: int) -> None:
    """A ``torch.save`` file is a zip too: refuse entries declaring more than the ceiling or,
    together, more than half this host's memory, before torch reads any."""
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError):
        return  # not a zip: torch.load says what it is
    total, budget = sum(i.file_size for i in infos), memory_budget()
    for info in infos:
        if info.file_size > max_member_bytes:
            raise ConfigError(f"{path}: entry {info.filename!r} declares "
                              f"{size_text(info.file_size)}, more than the "
                              f"{gib_text(max_member_bytes)} GiB allowed by {CEILING_KEY} "
                              "(raise it if the file is genuine)")
    if total > budget:
        raise ConfigError(f"{path}: its entries declare {total / 2**30:.1f} GiB, more than the "
                          f"{budget / 2**30:.1f} GiB allowed (half this host's memory)")


def read_graph_file(path: Path, max_member_bytes: int = 64 << 30,
                    stage: Stage | None = None) -> dict:
    """The arrays of an ``.npz`` or a ``torch.save``d Data/dict, as a plain dict (``stage``:
    see :func:`read_npz`)."""
    if path.suffix == ".npz":
        return read_npz(path, max_member_bytes, stage)
    _check_zip_sizes(path, max_member_bytes)
    from torch_geometric.data import Data, HeteroData
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage

    from gnnscale.data.typed_input import hetero_classes

    allowed = [Data, DataEdgeAttr, DataTensorAttr, GlobalStorage, *hetero_classes()]
    with torch.serialization.safe_globals(allowed):
        try:
            obj = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:
            raise ConfigError(
                f"{path}: cannot read it as .npz or as a torch.save of a torch_geometric Data "
                f"or a dict of tensors ({type(err).__name__}: {str(err).splitlines()[0]})"
            ) from err
    if isinstance(obj, HeteroData):
        return {"__hetero__": obj}
    if isinstance(obj, Data):
        out = {k: obj[k] for k in obj.keys()}
        out["num_nodes"] = obj.num_nodes
        return out
    if isinstance(obj, dict):
        return dict(obj)
    raise ConfigError(f"{path} holds a {type(obj).__name__}: expected a torch_geometric Data "
                      "or a dict of arrays")


def _numpy(value, what: str, path: Path) -> np.ndarray:
    """``value`` (array, tensor, list or number) as a numpy array of plain numbers."""
    try:
        if torch.is_tensor(value):
            value = value.detach().cpu()
            if value.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
                value = value.float()  # no numpy dtype
            a = value.numpy()
        else:
            a = np.asarray(value)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ConfigError(f"{path}: {what} is not an array of numbers ({err})") from err
    if a.dtype.kind not in "biuf":
        raise ConfigError(f"{path}: {what} holds {a.dtype} values: save plain numeric arrays")
    return a


def _check_shape(name: str, shape: tuple[int, ...], dtype: np.dtype, path: Path,
                 refuse=None) -> None:
    """The shape and kind of number each array must have (``refuse(problem)`` raises)."""
    def fail(problem: str) -> None:
        if refuse is not None:
            refuse(problem)
        raise ConfigError(f"{path}: {problem}")

    if dtype.kind not in "biuf":
        fail(f"{name} holds {dtype} values: save plain numeric arrays")
    if name == "edge_index" or name in LINK_ARRAYS:
        if len(shape) != 2 or shape[0] != 2:
            fail(f"{name} must have shape [2, E], got {tuple(shape)}")
        if dtype.kind not in "iu":
            fail(f"{name} must hold integer ids, got {dtype}: save it with an integer "
                 f"dtype, e.g. {name}.astype(np.int64)")
    elif name == "x" and len(shape) not in (1, 2):
        fail(f"x must be [N, F] (one feature row per node; [N] for one feature), got shape "
             f"{tuple(shape)}: flatten each node's features, e.g. x.reshape(len(x), -1)")
    elif name == "y" and not (len(shape) == 1 or (len(shape) == 2 and shape[1] == 1)):
        fail(f"y must be 1-D [N] (one class label per node, -1 = unlabelled) or [N, 1], got "
             f"shape {tuple(shape)}")
    elif name in SCALARS and math.prod(shape) != 1:
        fail(f"{name} must be a single integer, got an array of shape {tuple(shape)}")


def _scalar(value, what: str, path: Path) -> int:
    """A non-negative integer stored as a number or a one-entry array."""
    a = _numpy(value, what, path)
    _check_shape(what, a.shape, a.dtype, path)
    v = a.reshape(-1)[0]
    if a.dtype.kind == "f" and not (np.isfinite(v) and float(v).is_integer()):
        raise ConfigError(f"{path}: {what} must be an integer, got {v}")
    if int(v) < 0 or int(v) > INT64_MAX:
        raise ConfigError(f"{path}: {what} = {int(v)} is out of range")
    return int(v)


def _edge_index(value, path: Path) -> torch.Tensor | EdgeSource:
    """``edge_index`` as int64 ids: any integer dtype whose values fit (an edge source read
    in chunks is checked from its span)."""
    if isinstance(value, EdgeSource):
        try:
            value.span()
        except (ValueError, EOFError, OSError, zlib.error) as err:
            raise ConfigError(f"{path}: {err}") from err
        return value
    a = _numpy(value, "edge_index", path)
    _check_shape("edge_index", a.shape, a.dtype, path)
    if a.dtype.kind == "u" and a.dtype.itemsize == 8 and a.size and int(a.max()) > INT64_MAX:
        raise ConfigError(f"{path}: edge_index holds ids up to {int(a.max())}, beyond int64: "
                          "number the nodes densely from 0")
    return torch.from_numpy(a.astype(np.int64, copy=False))


def _labels(value, path: Path) -> torch.Tensor:
    """``y`` as int64 labels: integers, or floats with integral values."""
    a = _numpy(value, "y", path)
    _check_shape("y", a.shape, a.dtype, path)
    a = a.reshape(-1)
    if a.dtype.kind == "f" and not bool(np.all(np.isfinite(a) & (a == np.round(a)))):
        raise ConfigError(f"{path}: y must hold integer class labels")
    if a.size and float(a.max()) > INT64_MAX:
        raise ConfigError(f"{path}: y holds labels up to {a.max()}: labels must be class ids "
                          "0..K-1 (-1 = unlabelled)")
    return torch.from_numpy(a.astype(np.int64, copy=False))


def _tensor(value, what: str, path: Path) -> torch.Tensor:
    try:
        return torch.as_tensor(np.asarray(value) if not torch.is_tensor(value) else value)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{path}: {what} is not an array ({err})") from err


def _num_nodes(arrays: dict, ei: torch.Tensor | EdgeSource, x: torch.Tensor | None,
               y: torch.Tensor | None, path: Path) -> int:
    """The node count, checked against what backs it, before anything is allocated."""
    backed = {k: v.shape[0] for k, v in (("x", x), ("y", y)) if v is not None}
    if len(set(backed.values())) > 1:
        raise ConfigError(f"{path}: x has {backed['x']} rows but y has {backed['y']} entries")
    claimed = arrays.get("num_nodes")
    if claimed is not None:
        claimed = _scalar(claimed, "num_nodes", path)
        if backed and claimed != next(iter(backed.values())):
            raise ConfigError(f"{path}: num_nodes = {claimed} but "
                              + ", ".join(f"{k} has {v} rows" for k, v in backed.items())
                              + ": they must agree")
    n = next(iter(backed.values())) if backed else claimed
    if isinstance(ei, EdgeSource):
        span = ei.span()
        least, top = (min(span[0], span[2]), max(span[1], span[3])) if span else (0, -1)
    else:
        least, top = (int(ei.min()), int(ei.max())) if ei.numel() else (0, -1)
    if least < 0:
        raise ConfigError(f"{path}: edge_index holds negative ids ({least})")
    if n is None:
        n = top + 1
    if top >= n:
        raise ConfigError(f"{path}: edge_index holds ids up to {top} but num_nodes = {n} (from "
                          f"{'x/y rows' if backed else 'num_nodes'}): ids must lie in "
                          "[0, num_nodes)")
    if not backed and n > max(2 * ei.shape[1], 1):
        raise ConfigError(f"{path}: {n} nodes for {ei.shape[1]} edges and no x or y to back "
                          "them: number the nodes densely from 0, or give x")
    return n


def graph_from_arrays(arrays: dict, path: Path, symmetrize: bool, train_ratio: float,
                      val_ratio: float, split_seed: int, stage: Stage | None = None
                      ) -> GraphStore:
    """Validate the arrays of a user file and build the GraphStore (``stage``: the CSC is
    built out of core into it under its memory budget, :mod:`gnnscale.data.bounded`)."""
    if "edge_index" not in arrays:
        raise ConfigError(f"{path}: no 'edge_index' array (found {sorted(arrays)})")
    ei = _edge_index(arrays["edge_index"], path)
    x = None
    if arrays.get("x") is not None:
        xa = _numpy(arrays["x"], "x", path)
        _check_shape("x", xa.shape, xa.dtype, path)
        x = arrays["x"] if torch.is_tensor(arrays["x"]) and arrays["x"].dtype == torch.float32 \
            and arrays["x"].dim() == 2 else \
            torch.from_numpy(np.asarray(xa.reshape(-1, 1) if xa.ndim == 1 else xa,
                                        dtype=np.float32))
    y = None if arrays.get("y") is None else _labels(arrays["y"], path)
    num_nodes = _num_nodes(arrays, ei, x, y, path)
    given: dict[str, torch.Tensor] = {}
    kinds: dict[str, str] = {}
    for s in SPLITS:
        for suffix in ("mask", "idx"):
            if arrays.get(f"{s}_{suffix}") is not None:
                given[s] = _tensor(arrays[f"{s}_{suffix}"], f"{s}_{suffix}", path)
                kinds[s] = suffix
    split: dict[str, torch.Tensor | None]
    try:
        if given:
            split = index_split({s: given.get(s) for s in SPLITS}, num_nodes, kinds)
        elif y is not None:
            split = dict(ratio_split(y, train_ratio, val_ratio, split_seed))
        else:
            split = {s: None for s in SPLITS}
    except ValueError as err:
        raise ConfigError(f"{path}: {err}") from err
    largest = int(y.max()) if y is not None and y.numel() else -1
    if arrays.get("num_classes") is not None:
        num_classes = _scalar(arrays["num_classes"], "num_classes", path)
        check_num_classes(num_classes, largest, str(path))  # before a layer is sized by it
    else:
        num_classes = largest + 1
    links = {}
    for name in LINK_ARRAYS:  # a link-prediction split, scored as given (task=link)
        if arrays.get(name) is not None:
            a = _numpy(arrays[name], name, path)
            _check_shape(name, a.shape, a.dtype, path)
            links[name] = torch.from_numpy(a.astype(np.int64, copy=False))
    try:
        return GraphStore.from_edge_index(
            ei, num_nodes, symmetrize=symmetrize, edge_weight=arrays.get("edge_weight"),
            edge_attr=None if arrays.get("edge_attr") is None else arrays["edge_attr"]
            if isinstance(arrays["edge_attr"], RowSource) else
            _tensor(arrays["edge_attr"], "edge_attr", path).float(),
            x=x, y=y, train_idx=split["train"], val_idx=split["val"], test_idx=split["test"],
            num_classes=num_classes, name=path.stem, links=links, stage=stage,
            meta={"source": str(path), "inferred_classes": arrays.get("num_classes") is None},
        )
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{path}: {err}") from err


class CustomDataset(Dataset):
    """A user's graph file (see the module docstring for the accepted contents)."""

    def __init__(self, root: str = "data", path: str | None = None, symmetrize: bool = True,
                 train_ratio: float = 0.6, val_ratio: float = 0.2, split_seed: int = 0,
                 feature_norm: str = "none", max_member_gb: float = 64.0,
                 memory_budget: int | str | None = None) -> None:
        super().__init__(root, feature_norm, memory_budget)
        self.spec = CustomConfig(path=path, symmetrize=symmetrize, train_ratio=train_ratio,
                                 val_ratio=val_ratio, split_seed=split_seed,
                                 max_member_gb=max_member_gb,
                                 # checked by Dataset.__init__: the text parses alike
                                 memory_budget=None if memory_budget is None else
                                 str(memory_budget))
        self.spec.check()
        self.path = self.spec.file
        if not self.path.is_file():
            raise DatasetNotFoundError(
                f"custom dataset file {self.path} not found: save your graph there as .npz "
                "(edge_index, x, y, optional train/val/test masks) or with torch.save(Data)"
            )
        self.symmetrize = bool(symmetrize)
        self.train_ratio, self.val_ratio, self.split_seed = train_ratio, val_ratio, split_seed
        self.max_member_bytes = int(max_member_gb * 2**30)

    @property
    def key(self) -> str:
        """The processed folder's name for this dataset and its options."""
        key = self.spec.key()
        if key is None:  # the file was there when the loader was made
            raise DatasetNotFoundError(f"custom dataset file {self.path} is gone")
        return key

    @property
    def source(self) -> str:
        """Where the graph comes from, for the summary line."""
        return str(self.path)

    def check(self, graph: GraphStore) -> None:
        """Refuse a converted graph this loader cannot train on."""
        check_task(graph, self.source, inferred_classes=graph.meta.get("inferred_classes", False))

    @property
    def streams(self) -> bool:
        """An ``.npz`` is streamed (features and edges in chunks); a ``torch.save`` file is
        unpickled whole."""
        return self.path.suffix == ".npz"

    def whole_bytes(self) -> int:
        """The ``torch.save`` file's size (read whole by ``torch.load``)."""
        return self.path.stat().st_size

    def budget_hint(self) -> str:
        """A ``torch.save`` file cannot be read in parts: save it as ``.npz``."""
        return ("torch.load reads a saved Data/HeteroData whole: save its arrays with np.savez "
                "(the .npz layout is streamed) or raise the budget")

    def process(self) -> GraphStore:
        """Read the raw files into a graph (called once; the result is saved and memory-mapped)."""
        from gnnscale.data import typed_input

        parts = None
        if self.path.suffix == ".npz" and typed_input.is_typed_npz(_npz_names(self.path)):
            parts = typed_input.read_typed_npz(self.path, self.max_member_bytes, self.stage)
        else:
            arrays = read_graph_file(self.path, self.max_member_bytes, self.stage)
            if "__hetero__" in arrays:
                parts = typed_input.parts_from_hetero(arrays["__hetero__"], self.path)
        if parts is not None:
            return typed_input.graph_from_parts(parts, self.path, self.symmetrize,
                                                self.train_ratio, self.val_ratio,
                                                self.split_seed, self.stage)
        return graph_from_arrays(arrays, self.path, self.symmetrize, self.train_ratio,
                                 self.val_ratio, self.split_seed, self.stage)


def _npz_names(path: Path) -> list[str]:
    """The array names of an ``.npz`` (none when it is not a readable zip: the reader says
    why)."""
    try:
        with zipfile.ZipFile(path) as zf:
            return [n.removesuffix(".npy") for n in zf.namelist()]
    except (zipfile.BadZipFile, OSError):
        return []


