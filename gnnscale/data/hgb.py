"""HGB's node classification graphs (``dataset=acm``) from HGB's text files, read without PyG's
``HGBDataset``.

Raw files (``<dataset dir>`` = ``raw_dir``, else ``<root>/hgb/acm/raw/ACM``, ``<root>/ACM/raw``,
then the shared datasets folder's ``hetero/hgb/acm/raw/ACM``)::

    info.dat        JSON: node type names, link types (start, end, meaning), class names
    node.dat        id<TAB>name<TAB>type[<TAB>comma-separated features]
    link.dat        source<TAB>destination<TAB>link type<TAB>weight
    label.dat       id<TAB>name<TAB>type<TAB>label: the training nodes
    label.dat.test  the same for the test nodes

A node's type-local id is its position among the nodes of its type in ``node.dat``; an edge
type is named as PyG names it: ``(start, relation, end)`` with the middle word of the
meaning (``paper-cite-paper`` -> ``cite``), ``to`` when that word is the end type
(``paper-author`` -> ``(paper, to, author)``). Edge weights are kept only when some differ
from 1. The files give training and test labels; ``val_ratio`` of the training nodes (20%,
as HGB's code does, but with ``split_seed`` instead of an unseeded shuffle) are held out for
validation. ACM: paper 3,025, author 5,959, subject 56 (1,902 features each), term 1,902
(none); 8 edge types, 547,872 edges; 3 classes; 726 train, 181 val, 2,118 test papers.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from gnnscale.data.base import SpecDataset
from gnnscale.data.convert import find_raw, raw_candidates
from gnnscale.data.graph import GraphStore
from gnnscale.data.schemas import HGB_GRAPHS, HgbConfig
from gnnscale.data.typed_splits import hold_out

FILES = ("info.dat", "node.dat", "link.dat", "label.dat", "label.dat.test")


def _schema(info_file: Path) -> tuple[dict[int, str], dict[int, tuple[str, str, str]]]:
    """``({node type id: name}, {link type id: (source, relation, destination)})``."""
    try:
        info = json.loads(info_file.read_text(encoding="utf-8"))
        n_types = {int(k): str(v) for k, v in info["node.dat"]["node type"].items()}
        e_types = {}
        for k, v in info["link.dat"]["link type"].items():
            src, dst = n_types[int(v["start"])], n_types[int(v["end"])]
            words = str(v["meaning"]).split("-")
            rel = words[1] if len(words) > 1 else "to"
            e_types[int(k)] = (src, "to" if dst in (rel, rel[1:]) else rel, dst)
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{info_file}: not an HGB info.dat (node.dat.node type and "
                         f"link.dat.link type expected: {type(err).__name__}: {err})") from err
    return n_types, e_types


def _lines(path: Path, fields: int) -> list[list[str]]:
    """The tab-separated lines of ``path``, each with at least ``fields`` fields."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line:
                continue
            parts = line.split("\t")
            if len(parts) < fields:
                raise ValueError(f"{path}:{n}: {len(parts)} tab-separated fields, at least "
                                 f"{fields} expected")
            rows.append(parts)
    return rows


def _floats(rows: list[str], path: Path, what: str) -> np.ndarray:
    """Comma-separated feature rows as one float32 matrix (parsed as float64, as PyG does)."""
    widths = {r.count(",") + 1 for r in rows}
    if len(widths) != 1:
        raise ValueError(f"{path}: the {what} feature rows have {sorted(widths)} values; one "
                         "width per node type expected")
    width = widths.pop()
    joined = ",".join(rows).encode("ascii", errors="replace")
    raw = np.frombuffer(joined, dtype=np.uint8)
    if raw.size == 2 * len(rows) * width - 1 and bool((raw[1::2] == ord(",")).all()):
        digits = raw[0::2] - ord("0")  # every value one digit (bag-of-words 0/1): read directly
        if bool((digits <= 9).all()):
            return digits.astype(np.float32).reshape(len(rows), width)
    try:
        flat = np.array(joined.split(b","), dtype=np.float64)
    except ValueError as err:
        raise ValueError(f"{path}: a {what} feature value is not a number ({err})") from None
    return flat.reshape(len(rows), width).astype(np.float32)


def _links(path: Path) -> np.ndarray:
    """``link.dat`` as a float64 ``[E, 4]`` table (source, destination, type, weight)."""
    try:
        table = np.loadtxt(path, delimiter="\t", dtype=np.float64, ndmin=2)
    except ValueError as err:
        raise ValueError(f"{path}: not 'source<TAB>destination<TAB>type<TAB>weight' lines "
                         f"({err})") from None
    if table.size and table.shape[1] != 4:
        raise ValueError(f"{path}: {table.shape[1]} columns, 4 expected (source, destination, "
                         "type, weight)")
    return table.reshape(-1, 4)


def read_hgb(folder: Path, val_ratio: float, split_seed: int, name: str) -> GraphStore:
    """The typed graph in an HGB node classification folder (see the module docstring)."""
    n_types, e_types = _schema(folder / "info.dat")
    local: dict[int, tuple[str, int]] = {}
    count: dict[str, int] = dict.fromkeys(n_types.values(), 0)
    feat_rows: dict[str, list[str]] = defaultdict(list)
    for parts in _lines(folder / "node.dat", 3):
        t = n_types.get(int(parts[2]))
        if t is None:
            raise ValueError(f"{folder / 'node.dat'}: node {parts[0]} has type {parts[2]}, "
                             f"which info.dat does not name ({sorted(n_types)})")
        local[int(parts[0])] = (t, count[t])
        count[t] += 1
        if len(parts) >= 4:
            feat_rows[t].append(parts[3])
    feats = {}
    for t, rows in feat_rows.items():
        if len(rows) != count[t]:
            raise ValueError(f"{folder / 'node.dat'}: {len(rows)} of the {count[t]} {t!r} nodes "
                             "have features; all or none of a type's nodes must")
        feats[t] = torch.from_numpy(_floats(rows, folder / "node.dat", t))
    links = _links(folder / "link.dat")
    ids = np.fromiter(local, dtype=np.int64, count=len(local))
    if links.size and (int(links[:, :2].min()) < 0 or int(links[:, :2].max()) > int(ids.max())):
        raise ValueError(f"{folder / 'link.dat'}: node ids outside those of node.dat")
    lookup = np.full(int(ids.max()) + 1 if ids.size else 0, -1, dtype=np.int64)
    lookup[ids] = [i for _, i in local.values()]
    src, dst = lookup[links[:, 0].astype(np.int64)], lookup[links[:, 1].astype(np.int64)]
    if links.size and bool(((src < 0) | (dst < 0)).any()):
        raise ValueError(f"{folder / 'link.dat'}: an edge names a node id that node.dat lacks")
    kind = links[:, 2].astype(np.int64)
    edge_index, edge_weight = {}, {}
    for k, et in e_types.items():
        mine = kind == k
        edge_index[et] = torch.from_numpy(np.stack([src[mine], dst[mine]]))
        w = links[mine, 3]
        if w.size and not bool((w == 1.0).all()):
            edge_weight[et] = torch.from_numpy(w.astype(np.float32))
    unknown = np.setdiff1d(np.unique(kind), np.fromiter(e_types, dtype=np.int64))
    if unknown.size:
        raise ValueError(f"{folder / 'link.dat'}: link type {int(unknown[0])} is not in "
                         "info.dat")
    labels: dict[str, torch.Tensor] = {}
    split: dict[str, dict[str, list[int]]] = {"train": defaultdict(list),
                                              "test": defaultdict(list)}
    for s, file in (("train", "label.dat"), ("test", "label.dat.test")):
        for parts in _lines(folder / file, 4):
            t, i = local[int(parts[0])]
            if t not in labels:
                labels[t] = torch.full((count[t],), -1, dtype=torch.int64)
            labels[t][i] = int(parts[3])
            split[s][t].append(i)
    train, val = {}, {}
    for t, members in split["train"].items():
        train[t], val[t] = hold_out(torch.tensor(sorted(members)), val_ratio, split_seed)
    test = {t: torch.tensor(sorted(members)) for t, members in split["test"].items()}
    return GraphStore.from_typed(
        count, edge_index, features=feats, y=labels, train_idx=train, val_idx=val,
        test_idx=test, edge_weight=edge_weight or None, name=name,
        meta={"source": str(folder),
              "split_name": f"HGB, val {val_ratio:g} of train, seed {split_seed}"})


class HgbDataset(SpecDataset):
    """An HGB node classification graph (ACM) with HGB's split."""

    def __init__(self, root: str = "data", name: str = "acm", raw_dir: str | None = None,
                 val_ratio: float = 0.2, split_seed: int = 0, feature_norm: str = "none",
                 memory_budget: int | str | None = None) -> None:
        spec = HgbConfig(name=name, raw_dir=raw_dir, val_ratio=val_ratio, split_seed=split_seed)
        super().__init__(root, feature_norm, spec, memory_budget)

    def process(self) -> GraphStore:
        """Read the raw files into a graph (called once; the result is saved and memory-mapped)."""
        folder = HGB_GRAPHS[self.name]
        src = find_raw(raw_candidates(self.spec.raw_dir, self.root,
                                      f"hgb/{self.name}/raw/{folder}", f"{folder}/raw",
                                      f"hetero/hgb/{self.name}/raw/{folder}"),
                       FILES, f"HGB {folder}")
        return read_hgb(src, float(self.spec.val_ratio), int(self.spec.split_seed), self.name)
