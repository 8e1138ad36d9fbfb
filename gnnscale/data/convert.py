"""Helpers shared by the loaders: locating raw files, reading npz files safely, splits, CSR
arrays to dense.

Missing raw files raise :class:`DatasetNotFoundError` naming every file expected and every
folder searched; nothing here downloads. An ``.npz`` is read member by member after its
declared sizes were checked (:func:`scan_npz`, :func:`read_member`): a member is never
inflated past what its header declares, and a damaged one is named.
"""

from __future__ import annotations

import math
import os
import warnings
import zipfile
import zlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from gnnscale.errors import ConfigError

SHARED_ENV = "GNNSCALE_SHARED_DATASETS"


class DatasetNotFoundError(FileNotFoundError):
    """Raw files of a dataset are missing (no download is ever attempted)."""


def shared_datasets_dir() -> Path | None:
    """The read-only real-data folder: ``$GNNSCALE_SHARED_DATASETS``, else
    ``<repo>/../shared/datasets``; None when absent."""
    env = os.environ.get(SHARED_ENV)
    path = Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "datasets"
    return path if path.is_dir() else None


def raw_candidates(raw_dir: str | None, root: Path, *layouts: str) -> list[Path]:
    """Folders to search for raw files: ``raw_dir`` alone when given, else each layout under
    ``root`` and then under the shared datasets folder (read only: files are copied out)."""
    if raw_dir:
        return [Path(os.path.expanduser(str(raw_dir)))]
    bases = [root]
    shared = shared_datasets_dir()
    if shared is not None:
        bases.append(shared)
    return [base / layout for base in bases for layout in layouts]


def find_raw(candidates: Sequence[Path], files: Sequence[str], what: str) -> Path:
    """The first folder in ``candidates`` that holds every one of ``files``."""
    for folder in candidates:
        if all((folder / f).is_file() for f in files):
            return folder
    searched = "\n  ".join(str(c) for c in candidates)
    raise DatasetNotFoundError(
        f"{what}: raw files not found (no download is attempted). Expected "
        f"{', '.join(files)} in one of:\n  {searched}\n"
        "Put the files there, or set dataset.raw_dir to the folder holding them "
        "(real copies may exist under ../shared/datasets, see its README)."
    )


def require_arrays(f: np.lib.npyio.NpzFile | Collection[str], names: set[str], path: Path,
                   what: str) -> None:
    """Refuse an opened npz ``f`` (or the names it holds, at ``path``) that lacks any of
    ``names``."""
    missing = names - set(getattr(f, "files", f))
    if missing:
        raise ValueError(f"{path} is not a {what} file: no {sorted(missing)}")


def memory_budget() -> int:
    """Bytes a file may declare: half the host's physical memory."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def _first_line(err: BaseException) -> str:
    text = str(err)
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"


def gib_text(nbytes: int) -> str:
    """A byte limit in GiB, as an option in GiB would be written: ``64``, ``0.5``."""
    return f"{nbytes / 2**30:.3g}"


def size_text(nbytes: int) -> str:
    """``384 bytes``, ``3,500,000,128 bytes (3.3 GiB)``."""
    if nbytes < 1 << 20:
        return f"{nbytes:,} bytes"
    unit, scale = ("GiB", 2**30) if nbytes >= 1 << 30 else ("MiB", 2**20)
    return f"{nbytes:,} bytes ({nbytes / scale:.1f} {unit})"


@dataclass(frozen=True)
class NpzMember:
    """One array of an ``.npz`` as its zip entry and ``.npy`` header declare it."""

    name: str  # without ".npy"
    info: zipfile.ZipInfo
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def entries(self) -> int:
        """Array entries the header declares."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of data the header declares (Python ints: no overflow)."""
        return self.entries * self.dtype.itemsize


def _npy_header(f, where: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from the ``.npy`` header at the start of the stream ``f``."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f".npy format version {version[0]}.{version[1]} is not read here")
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, _, dtype = read(f)
    except (OSError, zipfile.BadZipFile, zlib.error) as err:
        raise ConfigError(f"{where} cannot be read ({_first_line(err)}): the file is damaged; "
                          "write it again with np.savez") from err
    except (ValueError, EOFError) as err:
        raise ConfigError(f"{where} has no valid .npy header ({_first_line(err)}): the file is "
                          "damaged or not written by np.savez; write it again") from err
    return tuple(int(d) for d in shape), dtype


def scan_npz(zf: zipfile.ZipFile, path: Path, ceiling: int, ceiling_key: str | None,
             names: Collection[str] | None = None) -> dict[str, NpzMember]:
    """The members of the opened ``.npz`` ``zf`` (those in ``names``, when given) as their
    headers declare them; nothing of their data is read. Refuses a member that declares more
    than ``ceiling`` bytes (zip entry or ``.npy`` header; ``ceiling_key`` is the option that
    sets it, None: the ceiling is half this host's memory), holds Python objects, or whose
    header disagrees with its stored size."""
    members = {}
    for info in zf.infolist():
        name = info.filename.removesuffix(".npy")
        if names is not None and name not in names:
            continue  # never read, so never checked
        where = f"{path}: member {name!r}"
        allowed = f"more than the {gib_text(ceiling)} GiB " + (
            f"allowed by {ceiling_key} (raise it if the file is genuine)" if ceiling_key
            else "allowed (half this host's memory)")
        if info.file_size > ceiling:
            raise ConfigError(f"{where} declares {size_text(info.file_size)} uncompressed, "
                              f"{allowed}")
        try:
            with zf.open(info) as f:
                shape, dtype = _npy_header(f, where)
                header = f.tell()
        except (RuntimeError, NotImplementedError) as err:  # encrypted; unknown compression
            raise ConfigError(f"{where} cannot be opened ({err}): write the file with "
                              "np.savez or np.savez_compressed") from err
        if dtype.hasobject:
            raise ConfigError(f"{path}: array {name!r} holds Python objects, which are never "
                              "loaded from user files; save plain numeric arrays")
        member = NpzMember(name, info, shape, dtype)
        declared = f"{where}: its header declares shape {shape} {dtype}, " \
                   f"{size_text(member.nbytes)}"
        if member.nbytes > ceiling:
            raise ConfigError(f"{declared}, {allowed}")
        stored = info.file_size - header
        if stored != member.nbytes:
            state = "truncated" if stored < member.nbytes else "damaged or forged"
            raise ConfigError(f"{declared}, but it holds {size_text(max(stored, 0))} of data: "
                              f"the file is {state}; write it again with np.savez")
        members[name] = member
    return members


def read_member(zf: zipfile.ZipFile, member: NpzMember, path: Path) -> np.ndarray:
    """The array of one member that :func:`scan_npz` checked (reads its declared size)."""
    try:
        with zf.open(member.info) as f:
            return np.lib.format.read_array(f, allow_pickle=False)
    except (ValueError, EOFError, OSError, zipfile.BadZipFile, zlib.error) as err:
        raise ConfigError(f"{path}: member {member.name!r} cannot be read ({_first_line(err)}): "
                          "the file is damaged; write it again with np.savez") from err


def index_split(
    masks_or_idx: Mapping[str, torch.Tensor | np.ndarray | None], num_nodes: int,
    kinds: dict[str, str] | None = None,
) -> dict[str, torch.Tensor | None]:
    """Normalise ``{train,val,test}`` given as masks or id lists to int64 id tensors.

    ``kinds[split]`` says what the user declared: ``mask`` (boolean, or integer 0/1 with one
    entry per node: read as a mask with a warning), ``idx`` (integer ids) or, by default,
    ``auto`` (boolean = mask, integers = ids).
    """
    out: dict[str, torch.Tensor | None] = {}
    for split, value in masks_or_idx.items():
        if value is None:
            out[split] = None
            continue
        t = torch.as_tensor(np.asarray(value) if not torch.is_tensor(value) else value)
        kind = (kinds or {}).get(split, "auto")
        if kind == "mask" and t.dtype != torch.bool:
            t = _int_mask(t, split, num_nodes)
        if kind == "idx" and (t.dtype == torch.bool or t.is_floating_point()):
            raise ValueError(f"{split}_idx must hold integer node ids, got {t.dtype}: give a "
                             f"boolean mask as {split}_mask instead")
        if t.dtype == torch.bool:
            if t.numel() != num_nodes:
                raise ValueError(f"{split} mask has {t.numel()} entries for {num_nodes} nodes")
            t = t.reshape(-1).nonzero().reshape(-1)
        if t.is_floating_point():
            raise ValueError(f"{split} ids must be integers, got {t.dtype}")
        t = t.reshape(-1).long()
        if t.numel() and (int(t.min()) < 0 or int(t.max()) >= num_nodes):
            raise ValueError(f"{split} ids must lie in [0, {num_nodes})")
        out[split] = t
    return out


def _int_mask(t: torch.Tensor, split: str, num_nodes: int) -> torch.Tensor:
    """A ``{split}_mask`` stored as numbers: accepted when it is 0/1 with one entry per node."""
    if t.numel() != num_nodes:
        raise ValueError(f"{split}_mask has {t.numel()} entries for {num_nodes} nodes")
    if not bool(((t == 0) | (t == 1)).all()):
        raise ValueError(f"{split}_mask must be boolean (or 0/1), got other values in {t.dtype}")
    warnings.warn(f"{split}_mask is stored as {t.dtype} 0/1 values: read as a boolean mask "
                  f"({int(t.sum())} vertices in {split})", stacklevel=3)
    return t != 0


def per_class_split(
    y: torch.Tensor, num_classes: int, train_per_class: int, val_per_class: int, seed: int
) -> dict[str, torch.Tensor]:
    """Seeded random split: ``train_per_class`` and ``val_per_class`` nodes of every class
    (fewer when a class is small), every other labelled node in test."""
    gen = torch.Generator().manual_seed(seed)
    perm = torch.randperm(y.numel(), generator=gen)
    train, val = [], []
    for c in range(num_classes):
        members = perm[y[perm] == c]
        train.append(members[:train_per_class])
        val.append(members[train_per_class:train_per_class + val_per_class])
    train_idx = torch.sort(torch.cat(train)).values
    val_idx = torch.sort(torch.cat(val)).values
    taken = torch.zeros(y.numel(), dtype=torch.bool)
    taken[train_idx] = True
    taken[val_idx] = True
    taken |= y < 0
    test_idx = (~taken).nonzero().reshape(-1)
    return {"train": train_idx, "val": val_idx, "test": test_idx}


def ratio_split(
    y: torch.Tensor, train_ratio: float, val_ratio: float, seed: int
) -> dict[str, torch.Tensor]:
    """Seeded random split of the labelled nodes (``y >= 0``) by ratios; test = the rest."""
    if train_ratio <= 0 or val_ratio < 0 or train_ratio + val_ratio > 1:
        raise ValueError("need train_ratio > 0, val_ratio >= 0, train_ratio + val_ratio <= 1")
    labelled = (y >= 0).nonzero().reshape(-1)
    gen = torch.Generator().manual_seed(seed)
    order = labelled[torch.randperm(labelled.numel(), generator=gen)]
    n_train = max(1, int(round(train_ratio * order.numel())))
    n_val = int(round(val_ratio * order.numel()))
    parts = (order[:n_train], order[n_train:n_train + n_val], order[n_train + n_val:])
    return {s: torch.sort(p).values for s, p in zip(("train", "val", "test"), parts)}


def csr_to_dense(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
                 shape: tuple[int, int]) -> np.ndarray:
    """The dense matrix of CSR arrays (explicitly stored entries, repeated ones summed)."""
    rows, cols = int(shape[0]), int(shape[1])
    check_csr(indptr, indices, rows, f"CSR arrays for shape {(rows, cols)}")
    if indices.size != data.size or (indices.size and not 0 <= int(indices.min()) <= int(
            indices.max()) < cols):
        raise ValueError(f"inconsistent CSR arrays for shape {(rows, cols)}")
    out = np.zeros((rows, cols), dtype=data.dtype)
    row = np.repeat(np.arange(rows), np.diff(indptr))
    np.add.at(out, (row, indices.astype(np.int64)), data)
    return out


def check_csr(indptr: np.ndarray, indices: np.ndarray, rows: int, what: str) -> None:
    """``indptr`` must start at 0, never decrease and end at ``indices.size`` (so that
    expanding it allocates no more than the indices)."""
    if rows < 0 or indptr.shape != (rows + 1,) or int(indptr[0]) != 0 \
            or int(indptr[-1]) != indices.size or bool((np.diff(indptr) < 0).any()):
        raise ValueError(f"inconsistent {what}: indptr must have {rows + 1} entries, start "
                         f"at 0, never decrease and end at the {indices.size} indices")


def component_labels(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Each vertex's connected component (edges taken as undirected), named by its smallest
    vertex id: min-label propagation with pointer jumping, a few passes over the edges."""
    label = torch.arange(num_nodes)
    src = torch.cat([edge_index[0], edge_index[1]])
    dst = torch.cat([edge_index[1], edge_index[0]])
    while True:
        new = label.scatter_reduce(0, dst, label[src], reduce="amin")  # incl. its own label
        new = new[new]  # a label is a vertex of the same component with a label <= its own
        if torch.equal(new, label):
            return label
        label = new


def largest_component(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """The ids (ascending) of the largest connected component (ties: the one holding the
    smallest id), as Shchur et al. standardise the gnn-benchmark graphs."""
    label = component_labels(edge_index, num_nodes)
    sizes = torch.bincount(label, minlength=num_nodes)
    return (label == int(sizes.argmax())).nonzero().flatten()


def induced_subgraph(edge_index: torch.Tensor, num_nodes: int, keep: torch.Tensor
                     ) -> torch.Tensor:
    """``edge_index`` restricted to the vertices ``keep`` (ascending), renumbered 0..len-1."""
    new_id = torch.full((num_nodes,), -1, dtype=torch.long)
    new_id[keep] = torch.arange(keep.numel())
    mapped = new_id[edge_index]
    return mapped[:, (mapped >= 0).all(dim=0)]
