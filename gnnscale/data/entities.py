"""R-GCN's RDF entity classification graphs, AIFB and MUTAG (``dataset=aifb``, ``dataset=mutag``),
read from the files PyG's ``Entities`` reads, without ``rdflib`` or ``pandas``.

Raw files (``raw_dir``, else ``<root>/entities/<name>/raw``, ``<root>/<name>/raw``, then the
shared datasets folder's ``hetero/entities/<name>/raw``)::

    <name>_stripped.nt.gz   the graph as N-Triples, the label triples removed
    completeDataset.tsv     every labelled entity (gives the classes)
    trainingSet.tsv         the training entities and their labels
    testSet.tsv             the test entities and their labels

The N-Triples are parsed line by line here (``<subject> <predicate> <object> .``; subjects
are IRIs or blank nodes, objects IRIs, blank nodes or literals with their language tag or
datatype); repeated triples count once, as in an RDF graph. Every distinct subject or object
term (as written) is a node of the one node type ``entity``, numbered in sorted order of the
terms, so ids do not change between runs (PyG numbers them in Python set order, which does).
Each predicate is an edge type ``(entity, <its local name>, entity)`` and its reverse
``(entity, rev_<local name>, entity)``: predicates in order of decreasing frequency (ties by
IRI), a local name used twice gets ``_2``, ``_3`` (``graph.meta["relations"]`` maps names to
IRIs). Classes are the sorted label values of ``completeDataset.tsv`` (numbers by value:
MUTAG's ``1`` and ``1.0`` are one class). There are no features
and no validation split: ``val_ratio`` of the training entities (seeded) can be held out.
AIFB: 8,285 entities, 90 edge types, 58,086 edges, 4 classes, 140 train / 36 test; MUTAG:
23,644 entities, 46 edge types, 148,454 edges, 2 classes, 272 train / 68 test.
"""

from __future__ import annotations

import csv
import gzip
import re
from collections import Counter
from pathlib import Path

import torch

from gnnscale.data.base import SpecDataset
from gnnscale.data.convert import find_raw, raw_candidates
from gnnscale.data.graph import GraphStore
from gnnscale.data.schemas import EntitiesConfig
from gnnscale.data.typed_splits import hold_out

NODE_TYPE = "entity"
#: the columns naming the entity and its label in the task files
COLUMNS = {"aifb": ("person", "label_affiliation"), "mutag": ("bond", "label_mutagenic")}
_IRI = r"<[^<>\s]*>"
_BNODE = r"_:[^\s.]+(?:\.[^\s.]+)*"
_LITERAL = r'"(?:[^"\\]|\\.)*"(?:@[A-Za-z0-9-]+|\^\^' + _IRI + ")?"
TRIPLE = re.compile(rf"\s*({_IRI}|{_BNODE})\s+({_IRI})\s+({_IRI}|{_BNODE}|{_LITERAL})\s*\.\s*")
_NAME = re.compile(r"[^A-Za-z0-9_]+")


def read_ntriples(path: Path) -> list[tuple[str, str, str]]:
    """The distinct triples of a (gzipped) N-Triples file, terms as written, in file order."""
    opener = gzip.open if path.suffix == ".gz" else open
    seen: dict[tuple[str, str, str], None] = {}
    with opener(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            m = TRIPLE.fullmatch(line.rstrip("\r\n"))
            if m is None:
                raise ValueError(f"{path}:{n}: not an N-Triples line ('<subject> <predicate> "
                                 f"<object> .'): {stripped[:100]!r}")
            s, p, o = m.groups()
            seen[s, p, o] = None
    return list(seen)


def relation_names(predicates: list[str]) -> dict[str, str]:
    """``{predicate IRI: relation name}``: the IRI's local name (after the last ``#`` or
    ``/``, other characters than letters, digits and ``_`` replaced by ``_``), ``_2``, ``_3``
    appended to a name already taken."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for p in predicates:
        base = _NAME.sub("_", re.split(r"[#/]", p.strip("<>").rstrip("#/"))[-1]) or "rel"
        name, k = base, 1
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        out[p] = name
    return out


def _task(path: Path, columns: tuple[str, str]) -> list[tuple[str, str]]:
    """``(entity IRI, label)`` rows of a tab-separated task file."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t")
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: no column {missing[0]!r} (columns: {reader.fieldnames})")
        return [(row[columns[0]], row[columns[1]]) for row in reader]


def _label(value: str) -> tuple[int, float | str]:
    """A label as a sortable key: numbers by value (``1`` and ``1.0`` are one class, as pandas
    reads MUTAG's files), anything else as text."""
    try:
        return 0, float(value)
    except ValueError:
        return 1, value


def read_entities(folder: Path, name: str, val_ratio: float = 0.0, split_seed: int = 0
                  ) -> GraphStore:
    """The typed graph in an Entities raw folder (see the module docstring)."""
    triples = read_ntriples(folder / f"{name}_stripped.nt.gz")
    terms = sorted({t for s, _, o in triples for t in (s, o)})
    node_id = {t: i for i, t in enumerate(terms)}
    freq = Counter(p for _, p, _ in triples)
    predicates = sorted(freq, key=lambda p: (-freq[p], p))
    names = relation_names(predicates)
    pairs: dict[str, list[tuple[int, int]]] = {p: [] for p in predicates}
    for s, p, o in triples:
        pairs[p].append((node_id[s], node_id[o]))
    edges = {(NODE_TYPE, names[p], NODE_TYPE): torch.tensor(pairs[p], dtype=torch.int64).t()
             for p in predicates}
    columns = COLUMNS[name]
    classes = sorted({_label(lab) for _, lab in _task(folder / "completeDataset.tsv", columns)})
    cls = {lab: i for i, lab in enumerate(classes)}
    y = torch.full((len(terms),), -1, dtype=torch.int64)
    split = {}
    for s, file in (("train", "trainingSet.tsv"), ("test", "testSet.tsv")):
        ids = []
        for entity, lab in _task(folder / file, columns):
            i = node_id.get(f"<{entity}>")
            if i is None or _label(lab) not in cls:
                raise ValueError(f"{folder / file}: entity {entity} or its label {lab!r} is not "
                                 "in the graph or completeDataset.tsv")
            y[i] = cls[_label(lab)]
            ids.append(i)
        split[s] = torch.tensor(sorted(ids), dtype=torch.int64)
    train, val = hold_out(split["train"], val_ratio, split_seed)
    return GraphStore.from_typed(
        {NODE_TYPE: len(terms)}, edges, y={NODE_TYPE: y}, num_classes=len(classes),
        train_idx={NODE_TYPE: train}, val_idx={NODE_TYPE: val} if val_ratio else None,
        test_idx={NODE_TYPE: split["test"]}, add_reverse=True, name=name,
        meta={"source": str(folder), "relations": {names[p]: p.strip("<>") for p in predicates},
              "classes": [str(c[1]) for c in classes], "split_name": "R-GCN train/test" + (
                  f", val {val_ratio:g} of train, seed {split_seed}" if val_ratio else "")})


class EntitiesDataset(SpecDataset):
    """AIFB or MUTAG: one featureless node type, a pair of edge types per predicate."""

    def __init__(self, root: str = "data", name: str = "aifb", raw_dir: str | None = None,
                 val_ratio: float = 0.0, split_seed: int = 0, feature_norm: str = "none",
                 memory_budget: int | str | None = None) -> None:
        spec = EntitiesConfig(name=name, raw_dir=raw_dir, val_ratio=val_ratio,
                              split_seed=split_seed)
        super().__init__(root, feature_norm, spec, memory_budget)

    def process(self) -> GraphStore:
        """Read the raw files into a graph (called once; the result is saved and memory-mapped)."""
        files = [f"{self.name}_stripped.nt.gz", "completeDataset.tsv", "trainingSet.tsv",
                 "testSet.tsv"]
        src = find_raw(raw_candidates(self.spec.raw_dir, self.root, f"entities/{self.name}/raw",
                                      f"{self.name}/raw", f"hetero/entities/{self.name}/raw"),
                       files, f"Entities {self.name.upper()}")
        return read_entities(src, self.name, float(self.spec.val_ratio),
                             int(self.spec.split_seed))
