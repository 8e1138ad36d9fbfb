"""A processed dataset's sizes from its ``meta.json`` alone (torch-free): what the launcher's
checks read instead of loading the graph.

The launcher trusts these sizes only when ``meta.json`` is consistent: its sizes agree with
its arrays' shapes (:func:`size_problem`), those shapes with the ``.npy`` files' headers,
and its checksum with its fields and recorded digests (:func:`combine`); anything else reads
as "not processed", and the loader then names the file and field.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the processed format this reader understands (``gnnscale.data.processed.FORMAT_VERSION``);
#: 3: the checksum covers the name and the sizes too
FORMAT = 3
#: the graph store's arrays, in checksum order; then a link split's (``graph.LINK_ARRAYS``)
ARRAYS = ("indptr", "indices", "x", "y", "train_idx", "val_idx", "test_idx", "edge_weight")
LINK_ARRAYS = ("train_pos", "val_pos", "val_neg", "test_pos", "test_neg")
#: The parts of a graph a task may need (``TaskConfig.needs``): how a refusal names one the
#: graph lacks, and how it lists what the task needs.
PARTS = {"features": ("features (x)", "features (x)"), "labels": ("labels (y)", "labels (y)"),
         "train_split": ("a training split (train_idx or train_mask)", "a training split")}


def fields_string(name: str, num_nodes: int, num_edges: int, num_features: int) -> str:
    """The scalar fields of meta.json that the checksum covers (beside the arrays' digests
    and the number of classes), as one canonical string."""
    return json.dumps([str(name), int(num_nodes), int(num_edges), int(num_features)])


def meta_fields(meta: dict) -> str:
    """:func:`fields_string` of a meta.json's content."""
    return fields_string(meta["name"], meta["num_nodes"], meta["num_edges"],
                         meta["num_features"])


def combine(digests: dict[str, str], num_classes: int, fields: str) -> str:
    """The checksum of a processed graph: its arrays' digests, classes and fields."""
    h = hashlib.blake2b(digest_size=16)
    for name in ARRAYS:
        h.update(f"{name}:{digests.get(name, 'none')};".encode())
    for name in LINK_ARRAYS:  # only when present: a graph without them hashes as it always did
        if name in digests:
            h.update(f"{name}:{digests[name]};".encode())
    h.update(str(num_classes).encode())
    h.update(f";fields:{fields}".encode())
    return h.hexdigest()


def size_problem(meta: dict) -> str | None:
    """What in meta.json's sizes disagrees with its arrays' shapes (one phrase naming the
    field), or None."""
    arrays = meta["arrays"]

    def shape(name: str) -> list | None:
        info = arrays.get(name)
        return None if info is None else list(info["shape"])

    for field in ("num_nodes", "num_edges", "num_features", "num_classes"):
        v = meta.get(field)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            return f"field {field} is {v!r}, not an integer >= 0"
    indptr, indices, x = shape("indptr"), shape("indices"), shape("x")
    if indptr is None or indices is None:
        return "field arrays lacks indptr or indices"
    expected = {"num_nodes": indptr[0] - 1, "num_edges": indices[0],
                "num_features": 0 if x is None else (x[1] if len(x) == 2 else -1)}
    for field, want in expected.items():
        if meta[field] != want:
            return (f"field {field} is {meta[field]} but the arrays' shapes give {want}: "
                    "meta.json was edited")
    for name, rows in (("x", expected["num_nodes"]), ("y", expected["num_nodes"]),
                       ("edge_weight", expected["num_edges"])):
        s = shape(name)
        if s is not None and (not s or s[0] != rows):
            return f"field arrays.{name}.shape is {s}: {rows} rows expected"
    return None


def _npy_shape(file: Path) -> tuple:
    """The shape in a ``.npy`` file's header (nothing else is read)."""
    import numpy as np

    with open(file, "rb") as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            return np.lib.format.read_array_header_1_0(f)[0]
        return np.lib.format.read_array_header_2_0(f)[0]


def consistent(folder: Path, meta: dict) -> bool:
    """Whether ``meta`` (of ``folder``'s meta.json) agrees with itself and the files' headers:
    sizes against shapes, shapes against the ``.npy`` headers, the checksum against the
    fields and recorded digests (no array is hashed)."""
    if size_problem(meta) is not None:
        return False
    for name in ("indptr", "indices", "x"):
        if name in meta["arrays"] and \
                list(_npy_shape(folder / f"{name}.npy")) != meta["arrays"][name]["shape"]:
            return False
    digests = {n: info["sha256"] for n, info in meta["arrays"].items()}
    return combine(digests, meta["num_classes"], meta_fields(meta)) == meta["checksum"]


@dataclass(frozen=True)
class DatasetMeta:
    """Sizes and splits of a processed graph."""

    name: str
    num_nodes: int
    num_edges: int
    num_features: int
    num_classes: int
    num_train: int
    has_features: bool
    has_labels: bool
    has_train: bool
    has_edge_weight: bool = False
    checksum: str | None = None

    @classmethod
    def read(cls, folder: str | Path | None) -> DatasetMeta | None:
        """The metadata of the processed graph in ``folder``; None when there is none, or
        anything about it is unexpected (the loader then says what)."""
        if folder is None:
            return None
        try:
            meta = json.loads((Path(folder) / "meta.json").read_text())
            if meta.get("format") != FORMAT or not consistent(Path(folder), meta):
                return None
            arrays: dict[str, Any] = meta["arrays"]
            train = arrays.get("train_idx")
            return cls(name=str(meta["name"]), num_nodes=int(meta["num_nodes"]),
                       num_edges=int(meta["num_edges"]),
                       num_features=int(meta["num_features"]),
                       num_classes=int(meta["num_classes"]),
                       num_train=int(train["shape"][0]) if train else 0,
                       has_features="x" in arrays, has_labels="y" in arrays,
                       has_train=train is not None,
                       has_edge_weight="edge_weight" in arrays,
                       checksum=str(meta["checksum"]))
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None

    def lacks(self, needs: tuple[str, ...] = tuple(PARTS)) -> str | None:
        """The parts of :data:`PARTS` named in ``needs`` that this graph lacks, named (None:
        nothing; by default what node classification needs)."""
        return lacks(self.has_features, self.has_labels, self.has_train, needs)

    @classmethod
    def of(cls, graph: Any) -> DatasetMeta:
        """The metadata of a loaded graph (a :class:`~gnnscale.data.graph.GraphStore`)."""
        train = graph.train_idx
        return cls(name=graph.name, num_nodes=int(graph.num_nodes),
                   num_edges=int(graph.num_edges), num_features=int(graph.num_features),
                   num_classes=int(graph.num_classes),
                   num_train=0 if train is None else int(train.numel()),
                   has_features=graph.x is not None, has_labels=graph.y is not None,
                   has_train=train is not None, has_edge_weight=graph.edge_weight is not None,
                   checksum=graph.meta.get("checksum"))


def lacks(has_features: bool, has_labels: bool, has_train: bool,
          needs: tuple[str, ...] = tuple(PARTS)) -> str | None:
    """``"labels (y)"``, ``"features (x) and labels (y)"``...: the parts of ``needs`` (keys of
    :data:`PARTS`; by default all, what node classification needs) a graph lacks, or None."""
    has = {"features": has_features, "labels": has_labels, "train_split": has_train}
    missing = [PARTS[part][0] for part in needs if not has[part]]
    if not missing:
        return None
    return _listed(missing)


def lacks_message(name: str, missing: str, task: str = "node classification",
                  needs: tuple[str, ...] = tuple(PARTS)) -> str:
    """The refusal of a graph ``task`` cannot train on: what it lacks, what ``task`` needs."""
    return f"dataset {name} lacks {missing}: {task} needs {_listed([PARTS[p][1] for p in needs])}"


def _listed(words: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
