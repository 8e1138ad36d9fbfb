"""Typed schemas of the ``dataset`` options (torch-free: the launcher composes and checks a
config with these alone; each ``_target_`` names the loader that produces the graph).

Each schema also names the dataset's processed folder (:meth:`DatasetConfig.processed_dir`,
``<root>/<key>[-<norm>norm]/processed``), so the launcher reads the dataset's ``meta.json``
(:mod:`gnnscale.data.metadata`) without importing a loader; the loaders take their key and
their checks from here.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Collection
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar

from gnnscale.data.presets import params_key, resolve
from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.schema import Options, require_range


class FeatureNorm(str, Enum):
    """A transform of the input features, applied once when the dataset is processed."""

    none = "none"
    row = "row"  # each row divided by its sum (Kipf & Welling; PyG's NormalizeFeatures)


PLANETOID_NAMES = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}
# option -> (collection, folder name, raw file)
NPZ_GRAPHS = {
    "computers": ("Amazon", "Computers", "amazon_electronics_computers.npz"),
    "photo": ("Amazon", "Photo", "amazon_electronics_photo.npz"),
    "cs": ("Coauthor", "CS", "ms_academic_cs.npz"),
    "physics": ("Coauthor", "Physics", "ms_academic_phy.npz"),
}
HETEROPHILOUS_NAMES = ("roman_empire", "amazon_ratings", "minesweeper", "tolokers", "questions")
HETEROPHILOUS_SPLITS = 10
# option -> (OGB name, folder, split type, number of classes, binary raw format)
#: OGB link-prediction graphs: option -> (OGB name, folder, split type, undirected)
OGBL_GRAPHS = {
    "collab": ("ogbl-collab", "ogbl_collab", "time", True),
    "ppa": ("ogbl-ppa", "ogbl_ppa", "throughput", True),
    "ddi": ("ogbl-ddi", "ogbl_ddi", "target", True),
    "citation2": ("ogbl-citation2", "ogbl_citation2", "time", False),
}
OGB_GRAPHS = {
    "arxiv": ("ogbn-arxiv", "ogbn_arxiv", "time", 40, False),
    "products": ("ogbn-products", "ogbn_products", "sales_ranking", 47, False),
    "papers100m": ("ogbn-papers100M", "ogbn_papers100M", "time", 172, True),
}
#: MAGNN's typed graphs (PyG's ``DBLP``, ``IMDB``): option -> (folder, the splits it has)
MAGNN_GRAPHS = {"dblp": ("DBLP", ("magnn", "hgb")), "imdb": ("IMDB", ("magnn",))}
#: HGB's node classification graphs kept in the shared folder: option -> folder
HGB_GRAPHS = {"acm": "ACM"}
#: R-GCN's entity classification graphs (PyG's ``Entities``)
ENTITIES_NAMES = ("aifb", "mutag")


def feature_norm_of(value: str | FeatureNorm) -> FeatureNorm:
    """``value`` (``dataset.feature_norm``) as a :class:`FeatureNorm`; ConfigError naming the
    choices when it is none of them."""
    norm = getattr(value, "value", value)
    if norm not in FeatureNorm.__members__:
        raise ConfigError(f"dataset.feature_norm must be one of "
                          f"{list(FeatureNorm.__members__)}, got {norm!r}")
    return FeatureNorm[norm]


def processed_dir(root: str | os.PathLike, key: str, feature_norm: str) -> Path:
    """``<root>/<key>[-<feature_norm>norm]/processed``: a transform is a different copy."""
    norm = getattr(feature_norm, "value", feature_norm)
    suffix = "" if norm == "none" else f"-{norm}norm"
    return Path(os.path.expanduser(str(root))) / f"{key}{suffix}" / "processed"


MIN_BUDGET = 16 << 20
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9,
          "gb": 10**9, "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30,
          "tib": 2**40}


def parse_budget(value: object, key: str = "dataset.memory_budget") -> int | None:
    """A memory budget in bytes from an int or text (``8GB``, ``512MiB``); None when unset."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        nbytes = int(value)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(value))
        if not m or m.group(2).lower() not in _UNITS:
            raise ConfigError(f"{key}={value!r}: give bytes or a size such as 8GB or 512MiB")
        nbytes = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if nbytes < MIN_BUDGET:
        raise ConfigError(f"{key}={value!r} is too small to process anything: give at least "
                          f"{MIN_BUDGET >> 20}MiB")
    return nbytes


@dataclass
class DatasetConfig(Options):
    """Fields every dataset option shares."""

    _target_: str = ""
    root: str = "${data_root}"
    feature_norm: FeatureNorm = FeatureNorm.none
    #: bytes (or "8GB") processing may use; None: unbounded (memory, not content: not in key)
    memory_budget: str | None = None

    def check(self) -> None:
        """A known feature transform and a readable memory budget."""
        parse_budget(self.memory_budget)
        feature_norm_of(self.feature_norm)

    def key(self) -> str | None:
        """The processed folder's name for this dataset and its options (None: the config
        alone cannot tell)."""
        return None

    def processed_dir(self) -> Path | None:
        """Where the processed copy is (or will be); None when the config cannot tell."""
        key = self.key()
        return None if key is None else processed_dir(self.root, key, self.feature_norm)


@dataclass
class RawDatasetConfig(DatasetConfig):
    """Fields of a dataset read from raw files: which one, and where its files are (None:
    ``<root>/<name>/raw``, then the shared datasets folder)."""

    #: the graphs the option reads, as :attr:`graph` spells them
    graphs: ClassVar[Collection[str]] = ()
    #: what those graphs are, for messages
    family: ClassVar[str] = "dataset"
    name: str = ""
    raw_dir: str | None = None

    @property
    def graph(self) -> str:
        """The graph's name as :attr:`graphs` spells it (``name`` in lower case)."""
        return self.name.lower()

    def check(self) -> None:
        """A known feature transform and one of the option's graphs."""
        super().check()
        if self.graph not in self.graphs:
            raise ConfigError(f"dataset.name: unknown {self.family} {self.name!r}; choose "
                              f"one of {list(self.graphs)}")


@register("dataset", "planetoid")
@dataclass
class PlanetoidConfig(RawDatasetConfig):
    """Options ``cora``, ``citeseer``, ``pubmed``."""

    graphs: ClassVar[Collection[str]] = PLANETOID_NAMES
    family: ClassVar[str] = "Planetoid dataset"
    _target_: str = "gnnscale.data.planetoid.PlanetoidDataset"
    name: str = "Cora"

    def key(self) -> str:
        """The graph's name in lower case."""
        return PLANETOID_NAMES[self.name.lower()].lower()


@register("dataset", "npz")
@dataclass
class NpzConfig(RawDatasetConfig):
    """Options ``computers``, ``photo``, ``cs``, ``physics``."""

    graphs: ClassVar[Collection[str]] = NPZ_GRAPHS
    family: ClassVar[str] = "gnn-benchmark graph"
    _target_: str = "gnnscale.data.npz.NpzDataset"
    name: str = "computers"
    train_per_class: int = 20
    val_per_class: int = 30
    split_seed: int = 0
    largest_component: bool = False  # Shchur et al.'s standardisation

    def check(self) -> None:
        """A gnn-benchmark graph and a split of at least one training vertex per class."""
        super().check()
        if self.train_per_class < 1 or self.val_per_class < 0:
            raise ConfigError("need dataset.train_per_class >= 1 and dataset.val_per_class "
                              ">= 0")

    def key(self) -> str:
        """Name, largest component, split sizes and seed."""
        return (f"{self.name.lower()}{'-lcc' if self.largest_component else ''}-split"
                f"{int(self.train_per_class)}-{int(self.val_per_class)}-seed"
                f"{int(self.split_seed)}")


@register("dataset", "heterophilous")
@dataclass
class HeterophilousConfig(RawDatasetConfig):
    """Option ``tolokers``."""

    graphs: ClassVar[Collection[str]] = HETEROPHILOUS_NAMES
    family: ClassVar[str] = "heterophilous graph"
    _target_: str = "gnnscale.data.heterophilous.HeterophilousDataset"
    name: str = "tolokers"
    split: int = 0

    @property
    def graph(self) -> str:
        """The graph's name as its files spell it."""
        return self.name.lower().replace("-", "_")

    def check(self) -> None:
        """A known graph and one of its fixed splits."""
        super().check()
        require_range("dataset.split", self.split, 0, HETEROPHILOUS_SPLITS)

    def key(self) -> str:
        """Name and split."""
        return f"{self.graph}-split{int(self.split)}"


@register("dataset", "ogb")
@dataclass
class OgbConfig(RawDatasetConfig):
    """Options ``arxiv``, ``products``, ``papers100m``."""

    graphs: ClassVar[Collection[str]] = OGB_GRAPHS
    family: ClassVar[str] = "OGB node dataset"
    _target_: str = "gnnscale.data.ogb.OgbNodeDataset"
    name: str = "arxiv"
    symmetrize: bool = True

    @property
    def graph(self) -> str:
        """The option's short name (``ogbn-`` dropped)."""
        return self.name.lower().removeprefix("ogbn-").removeprefix("ogbn_")

    def key(self) -> str:
        """``ogbn-<name>``, ``-directed`` when not symmetrised."""
        return f"ogbn-{self.graph}" + ("" if self.symmetrize else "-directed")


@dataclass
class TypedSplitConfig(RawDatasetConfig):
    """A typed graph read from raw files; ``val_ratio`` of its training nodes held out for
    validation with ``split_seed`` where its published split has no validation set."""

    val_ratio: float = 0.2
    split_seed: int = 0

    def check(self) -> None:
        """A known graph and a validation share in [0, 1)."""
        super().check()
        if not 0.0 <= float(self.val_ratio) < 1.0:
            raise ConfigError(f"dataset.val_ratio = {self.val_ratio}: the share of the training "
                              "nodes held out for validation must lie in [0, 1)")

    def _holdout_key(self) -> str:
        return f"-val{float(self.val_ratio):g}-seed{int(self.split_seed)}"


@register("dataset", "magnn")
@dataclass
class MagnnConfig(TypedSplitConfig):
    """Options ``dblp``, ``imdb``: MAGNN's typed graphs; ``split=magnn`` (400 / 400 / rest) or,
    for DBLP, ``split=hgb`` (HGB's split, ``val_ratio`` of its training authors validate)."""

    graphs: ClassVar[Collection[str]] = MAGNN_GRAPHS
    family: ClassVar[str] = "MAGNN graph"
    _target_: str = "gnnscale.data.magnn.MagnnDataset"
    name: str = "dblp"
    split: str = "magnn"

    def check(self) -> None:
        """A known graph and one of its splits."""
        super().check()
        splits = MAGNN_GRAPHS[self.graph][1]
        if self.split not in splits:
            raise ConfigError(f"dataset.split: {self.name} has the splits {list(splits)}, got "
                              f"{self.split!r}")

    def key(self) -> str:
        """Name and split (and the hold-out of an HGB split)."""
        return f"{self.graph}-{self.split}" + (self._holdout_key() if self.split == "hgb"
                                               else "")


@register("dataset", "hgb")
@dataclass
class HgbConfig(TypedSplitConfig):
    """Option ``acm``: an HGB graph from its ``node.dat``/``link.dat``/``label.dat`` files;
    ``val_ratio`` of the training nodes validate (HGB's 20%)."""

    graphs: ClassVar[Collection[str]] = HGB_GRAPHS
    family: ClassVar[str] = "HGB graph"
    _target_: str = "gnnscale.data.hgb.HgbDataset"
    name: str = "acm"

    def key(self) -> str:
        """``hgb-<name>`` and the hold-out."""
        return f"hgb-{self.graph}" + self._holdout_key()


@register("dataset", "entities")
@dataclass
class EntitiesConfig(TypedSplitConfig):
    """Options ``aifb``, ``mutag``: R-GCN's RDF graphs; their split has no validation set, so
    ``val_ratio`` defaults to 0 (R-GCN's figures train on every training node)."""

    graphs: ClassVar[Collection[str]] = ENTITIES_NAMES
    family: ClassVar[str] = "RDF entity graph"
    _target_: str = "gnnscale.data.entities.EntitiesDataset"
    name: str = "aifb"
    val_ratio: float = 0.0

    def key(self) -> str:
        """Name, and the hold-out when there is one."""
        return self.graph + (self._holdout_key() if self.val_ratio else "")


@register("dataset", "ogbn_mag")
@dataclass
class OgbMagConfig(DatasetConfig):
    """``dataset=ogbn_mag``: OGB's raw layout under ``<data_root>/ogbn_mag`` (or ``raw_dir``);
    ``add_reverse`` adds a reverse edge type for each of its four."""

    _target_: str = "gnnscale.data.ogb_mag.OgbMagDataset"
    raw_dir: str | None = None
    add_reverse: bool = True

    def key(self) -> str:
        """``ogbn-mag``, ``-directed`` without reverse edge types."""
        return "ogbn-mag" + ("" if self.add_reverse else "-directed")


@register("dataset", "hetero_sim")
@dataclass
class HeteroSimConfig(DatasetConfig):
    """``dataset=hetero_sim``: a generated ogbn-mag-like typed graph (``scale`` 1 has
    ogbn-mag's node and edge counts; the default 0.01 builds in about a second)."""

    _target_: str = "gnnscale.data.hetero_sim.HeteroSimDataset"
    scale: float = 0.01
    seed: int = 0
    num_features: int = 128
    num_classes: int | None = None  # None: 349 (ogbn-mag's) times sqrt(scale), at least 10
    p_intra: float = 0.8
    feature_signal: float = 0.2
    label_noise: float = 0.05
    degree_exponent: float = 2.2
    add_reverse: bool = True

    #: the largest scale (ogbn-mag x 4: 7.8M nodes, about 170M edges with reverses)
    MAX_SCALE: ClassVar[float] = 4.0

    def check(self) -> None:
        """Parameters the generator can produce."""
        super().check()
        if not 0.0 < float(self.scale) <= self.MAX_SCALE:
            raise ConfigError(f"dataset.scale = {self.scale}: must lie in (0, {self.MAX_SCALE:g}]"
                              " (1 = ogbn-mag's 1.94M nodes)")
        require_range("dataset.num_classes", self.classes, 2, 100_000)
        require_range("dataset.num_features", self.num_features, 1, 100_000)
        for name in ("p_intra", "label_noise"):
            v = float(getattr(self, name))
            if not 0.0 <= v <= 1.0:
                raise ConfigError(f"dataset.{name} = {v}: must lie in [0, 1]")
        if not float(self.feature_signal) >= 0.0:
            raise ConfigError(f"dataset.feature_signal = {self.feature_signal}: must be >= 0")
        if not float(self.degree_exponent) > 2.0:
            raise ConfigError(f"dataset.degree_exponent = {self.degree_exponent}: must exceed 2 "
                              "(a finite mean degree)")

    @property
    def classes(self) -> int:
        """The number of classes (and topics): ``num_classes``, else 349 x sqrt(scale) (at
        most 349, at least 10), so that a small graph keeps enough nodes per topic."""
        if self.num_classes is not None:
            return int(self.num_classes)
        return max(10, min(349, int(round(349 * float(self.scale) ** 0.5))))

    def key(self) -> str:
        """Scale, seed and a digest of every other parameter."""
        knobs = [self.num_features, self.classes, self.p_intra, self.feature_signal,
                 self.label_noise, self.degree_exponent, bool(self.add_reverse)]
        digest = hashlib.blake2b(json.dumps(knobs).encode(), digest_size=4).hexdigest()
        return f"hetero_sim-x{float(self.scale):g}-seed{int(self.seed)}-{digest}"


@register("dataset", "ogbl")
@dataclass
class OgblConfig(RawDatasetConfig):
    """Options ``collab``, ``ppa``, ``ddi``, ``citation2``: an ``ogbl-*`` graph and its
    published edge split (``task=link`` scores it as given)."""

    graphs: ClassVar[Collection[str]] = OGBL_GRAPHS
    family: ClassVar[str] = "OGB link dataset"
    _target_: str = "gnnscale.data.ogbl.OgbLinkDataset"
    name: str = "collab"
    symmetrize: bool | None = None  # None: the OGB default (undirected but citation2)

    @property
    def graph(self) -> str:
        """The option's short name (``ogbl-`` dropped)."""
        return self.name.lower().removeprefix("ogbl-").removeprefix("ogbl_")

    def key(self) -> str | None:
        """``ogbl-<graph>``, ``-sym`` when its edges are stored in both directions."""
        if self.graph not in OGBL_GRAPHS:
            return None
        sym = OGBL_GRAPHS[self.graph][3] if self.symmetrize is None else bool(self.symmetrize)
        return f"ogbl-{self.graph}" + ("-sym" if sym else "")


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
    max_member_gb: float = 64.0  # the largest array a file may declare (GiB), checked unread

    def check(self) -> None:
        """A file to read and a positive ceiling on its arrays."""
        super().check()
        if not self.path:
            raise ConfigError("dataset=custom needs dataset.path=FILE (.npz or torch.save of "
                              "Data)")
        if not self.max_member_gb > 0:
            raise ConfigError(f"dataset.max_member_gb = {self.max_member_gb}: give the largest "
                              "array a user file may hold, in GiB (> 0; default 64)")

    @property
    def file(self) -> Path:
        """The graph file, resolved."""
        return Path(os.path.expanduser(str(self.path))).resolve()

    def key(self) -> str | None:
        """The file's stem and a digest of its path, size, time and the split options (None
        when the file is not there: the loader says where it should be)."""
        if not self.path or not self.file.is_file():
            return None
        st = self.file.stat()
        ident = [str(self.file), st.st_size, st.st_mtime_ns, bool(self.symmetrize),
                 self.train_ratio, self.val_ratio, self.split_seed]
        digest = hashlib.blake2b(json.dumps(ident).encode(), digest_size=6).hexdigest()
        return f"custom-{self.file.stem}-{digest}"


@register("dataset", "saved")
@dataclass
class SavedConfig(DatasetConfig):
    """``dataset=saved dataset.path=DIR``: a graph already in the processed format
    (:func:`gnnscale.data.processed.save`; what ``gnnscale.train(data=...)`` writes)."""

    _target_: str = "gnnscale.data.saved.SavedDataset"
    path: str | None = None

    def check(self) -> None:
        """A folder to read, no feature transform (the folder is used as it is)."""
        super().check()
        if not self.path:
            raise ConfigError("dataset=saved needs dataset.path=DIR (a processed folder: "
                              "meta.json and its .npy arrays, as gnnscale.data.processed.save "
                              "writes it)")
        if getattr(self.feature_norm, "value", self.feature_norm) != "none":
            raise ConfigError("dataset=saved reads the folder as it is: dataset.feature_norm "
                              "must be none (transform the features before saving)")

    def processed_dir(self) -> Path | None:
        """The folder itself."""
        return self.folder() if self.path else None

    def folder(self) -> Path:
        """The folder ``path`` names (:meth:`check` makes sure it is given)."""
        return Path(os.path.expanduser(str(self.path))).resolve()


@register("dataset", "synthetic")
@dataclass
class SyntheticConfig(DatasetConfig):
    """``dataset=synthetic`` (preset small), ``dataset=products_sim`` or a paper-like preset
    (``products_like``, ``papers_like``, ``reddit_like``, ``web_like``); None = the preset's."""

    _target_: str = "gnnscale.data.synthetic.SyntheticDataset"
    preset: str = "small"
    scale: float = 1.0
    seed: int = 0
    num_nodes: int | None = None
    avg_degree: float | None = None
    num_features: int | None = None
    num_classes: int | None = None
    num_communities: int | None = None
    p_intra: float | None = None
    degree_exponent: float | None = None
    max_degree_ratio: float | None = None
    max_intra_share: float | None = None
    community_size_sigma: float | None = None
    feature_signal: float | None = None
    community_signal: float | None = None
    label_noise: float | None = None
    train_ratio: float | None = None
    val_ratio: float | None = None
    test_ratio: float | None = None
    train_region: float | None = None

    def params(self):
        """The generator's parameters: the preset, scaled, with this config's overrides."""
        skip = {"_target_", "root", "feature_norm", "memory_budget", "preset", "scale", "seed"}
        overrides = {k: v for k, v in vars(self).items() if k not in skip}
        return resolve(self.preset, float(self.scale), **overrides)

    def check(self) -> None:
        """Parameters the generator can produce."""
        super().check()
        self.params()

    def key(self) -> str:
        """Preset, scale, seed and a digest of every parameter."""
        return params_key(self.preset, self.scale, self.seed, self.params())


#: what a node type or relation may be named (``graph.TYPE_NAME``: it names a file)
TYPE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
#: the formats a table may have, by file suffix (a ``.gz``/``.bz2`` CSV is decompressed)
TABLE_FORMATS = {".csv": "csv", ".tsv": "csv", ".txt": "csv", ".parquet": "parquet",
                 ".pq": "parquet"}
#: bumped when the table reader's output for the same tables changes (part of the key)
TABLES_READER = 2


class TableFeatures:
    """What a table's ``features`` names: numeric columns, or one column of lists."""

    features: Any

    @property
    def feature_columns(self) -> list[str]:
        """The feature columns named, in order."""
        f = self.features
        return [] if f is None else [f] if isinstance(f, str) else [str(c) for c in f]

    @property
    def list_features(self) -> bool:
        """Whether ``features`` names one column of lists (the single-name form)."""
        return isinstance(self.features, str)


@dataclass
class NodeTableConfig(TableFeatures):
    """One node table of ``dataset=tables``: one row per node of ``type``, in internal id
    order. ``features``: a list of numeric columns, or one column name whose cells are lists
    (a Parquet list column; in CSV, numbers separated by spaces, commas or semicolons);
    ``label``: integers or class names (empty: unlabelled); ``split``: train/val/test."""

    path: str | None = None
    type: str = "node"
    id: str = "id"
    features: Any = None
    label: str | None = None
    split: str | None = None
    format: str | None = None  # csv | parquet (None: from the file's suffix)
    delimiter: str | None = None  # CSV only (None: tab for .tsv, else comma)
    nulls: list[str] | None = None  # CSV only: words that mean "empty" besides the empty field



@dataclass
class EdgeTableConfig(TableFeatures):
    """One edge table of ``dataset=tables``: one row per edge from ``src`` to ``dst`` (the
    user's node ids); ``type``: ``[source type, relation, destination type]``, or a relation
    (or nothing: ``to``) when there is one node type; ``weight``: an optional numeric
    column; ``features``: edge features, as a node table's (numeric columns, or one list
    column), kept as the graph's ``edge_attr`` of that edge type."""

    path: str | None = None
    type: Any = None
    src: str = "src"
    dst: str = "dst"
    weight: str | None = None
    features: Any = None
    format: str | None = None
    delimiter: str | None = None
    nulls: list[str] | None = None


@dataclass
class TablesSchema:
    """A ``dataset.schema`` file: its node and edge tables (paths relative to the file)."""

    nodes: list[NodeTableConfig] = field(default_factory=list)
    edges: list[EdgeTableConfig] = field(default_factory=list)


def table_format(table: NodeTableConfig | EdgeTableConfig, what: str) -> str:
    """``csv`` or ``parquet``: the table's ``format``, else from its file's suffix."""
    if table.format is not None:
        fmt = str(table.format).lower()
        if fmt not in ("csv", "parquet"):
            raise ConfigError(f"{what}.format must be csv or parquet, got {table.format!r}")
        return fmt
    suffixes = [s.lower() for s in Path(str(table.path)).suffixes]
    if suffixes and suffixes[-1] in (".gz", ".bz2"):
        suffixes = suffixes[:-1]
    guessed = TABLE_FORMATS.get(suffixes[-1] if suffixes else "")
    if guessed is None:
        raise ConfigError(f"{what}: cannot tell the format of {table.path} from its suffix; "
                          f"name it .csv, .tsv or .parquet or set {what}.format=csv|parquet")
    return guessed


@register("dataset", "tables")
@dataclass
class TablesConfig(DatasetConfig):
    """``dataset=tables``: the user's node and edge tables (CSV or Parquet), listed in
    ``nodes``/``edges`` or in a YAML file ``schema`` holding those two lists (its relative
    paths are relative to it). One node type and one edge type within it give a homogeneous
    graph; more give a typed one. ``symmetrize``: edges between nodes of one type are stored
    both ways; ``add_reverse``: an edge type between two node types gets its reverse type
    ``(dst, rev_<relation>, src)``. A labelled node type without a split column gets a seeded
    random split of its labelled nodes by ``train_ratio``/``val_ratio``."""

    _target_: str = "gnnscale.data.tables.TablesDataset"
    name: str | None = None  # None: the schema file's stem, else "tables"
    schema: str | None = None
    nodes: list[NodeTableConfig] = field(default_factory=list)
    edges: list[EdgeTableConfig] = field(default_factory=list)
    symmetrize: bool = True
    add_reverse: bool = True
    train_ratio: float = 0.6
    val_ratio: float = 0.2
    split_seed: int = 0
    batch_rows: int = 1 << 16  # rows read at a time (memory, not content: not in the key)

    @property
    def graph_name(self) -> str:
        """The graph's name: ``name``, else the schema file's stem, else ``tables``."""
        if self.name:
            return str(self.name)
        return Path(str(self.schema)).stem if self.schema else "tables"

    def tables(self) -> tuple[list[NodeTableConfig], list[EdgeTableConfig]]:
        """The node and edge tables, from the config or the schema file, with absolute paths
        and every edge ``type`` a ``(source, relation, destination)`` triple; a malformed
        list is a :class:`ConfigError` naming the key (or file) to fix."""
        base, where = Path.cwd(), "dataset"
        nodes, edges = [_as(NodeTableConfig, n) for n in self.nodes or []], \
            [_as(EdgeTableConfig, e) for e in self.edges or []]
        if self.schema:
            if nodes or edges:
                raise ConfigError("dataset=tables: give the tables in dataset.schema=FILE or in "
                                  "dataset.nodes/dataset.edges, not both")
            file = Path(os.path.expanduser(str(self.schema))).resolve()
            nodes, edges = _read_schema(file)
            base, where = file.parent, str(file)
        if not nodes:
            raise ConfigError("dataset=tables needs node tables: dataset.schema=FILE (a YAML "
                              "file with nodes: and edges: lists) or dataset.nodes=[{path: "
                              "..., id: ...}]")
        for i, n in enumerate(nodes):
            key = f"{where}: nodes[{i}]"
            n.path = _table_path(n.path, base, key)
            if not isinstance(n.type, str) or not TYPE_NAME.fullmatch(n.type):
                raise ConfigError(f"{key}.type {n.type!r} must be letters, digits, '_', '.' or "
                                  "'-': it names a file")
            table_format(n, key)
            _check_nulls(n, key)
            if n.features is not None and not (isinstance(n.features, str) or (
                    isinstance(n.features, (list, tuple)) and n.features)):
                raise ConfigError(f"{key}.features must be a list of column names, or one "
                                  f"column name whose cells are lists, got {n.features!r}")
        types = [n.type for n in nodes]
        twice = sorted({t for t in types if types.count(t) > 1})
        if twice:
            raise ConfigError(f"{where}: node type {twice[0]!r} has two node tables: give one "
                              "table per node type")
        if not edges:
            raise ConfigError(f"{where}: no edge tables: list at least one under edges")
        for i, e in enumerate(edges):
            key = f"{where}: edges[{i}]"
            e.path = _table_path(e.path, base, key)
            e.type = _edge_type(e.type, types, key)
            table_format(e, key)
            _check_nulls(e, key)
        ets = [tuple(e.type) for e in edges]
        twice_e = [et for et in ets if ets.count(et) > 1]
        if twice_e:
            raise ConfigError(f"{where}: edge type {list(twice_e[0])} has two edge tables: give "
                              "one table per edge type")
        return nodes, edges

    def check(self) -> None:
        """Tables that exist, each with a known format; edge types of its node types."""
        super().check()
        if self.train_ratio <= 0 or self.val_ratio < 0 or \
                self.train_ratio + self.val_ratio > 1:
            raise ConfigError("dataset.train_ratio > 0, dataset.val_ratio >= 0 and their sum "
                              f"<= 1 are needed, got {self.train_ratio} and {self.val_ratio}")
        if self.batch_rows < 1:
            raise ConfigError(f"dataset.batch_rows must be >= 1, got {self.batch_rows}")
        self.tables()

    def key(self) -> str | None:
        """``<name>-<digest>``: a digest of every table's path and content (a hash of its
        bytes, :func:`content_digest`) and of every option that changes the graph (None while
        a table is missing)."""
        try:
            nodes, edges = self.tables()
            ident: list = [TABLES_READER, self.graph_name, bool(self.symmetrize),
                           bool(self.add_reverse), float(self.train_ratio),
                           float(self.val_ratio), int(self.split_seed)]
            tables: list[NodeTableConfig | EdgeTableConfig] = [*nodes, *edges]
            for t in tables:
                ident.append([sorted((k, v) for k, v in vars(t).items()),
                              content_digest(Path(str(t.path)))])
        except (ConfigError, OSError):
            return None
        digest = hashlib.blake2b(json.dumps(ident, default=str).encode(),
                                 digest_size=6).hexdigest()
        return f"{self.graph_name}-{digest}"


#: a table's content digest by its path and file identity (size, times, inode), so one process
#: hashes an unchanged table once
_DIGESTS: dict[tuple, str] = {}


def content_digest(path: Path) -> str:
    """BLAKE2b of a file's bytes (a table's content: a rewrite that keeps its size and
    modification time, as ``cp -p`` or ``rsync -a`` do, changes it), remembered for the
    process while the file's size, times and inode stay the same. About 1 s per GB."""
    st = path.stat()
    ident = (str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
    digest = _DIGESTS.get(ident)
    if digest is None:
        h = hashlib.blake2b(digest_size=16)
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
        digest = _DIGESTS[ident] = h.hexdigest()
    return digest


def _as(cls: type, value: Any) -> Any:
    """A table entry as ``cls`` (from a dict, as :func:`gnnscale.registry.instance` gives)."""
    if isinstance(value, cls):
        return cls(**vars(value))
    if not isinstance(value, dict):
        raise ConfigError(f"a table entry must be a mapping of {cls.__name__} keys, got "
                          f"{value!r}")
    unknown = sorted(set(value) - {f.name for f in fields(cls)})
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]!r} in a table entry; known: "
                          f"{[f.name for f in fields(cls)]}")
    return cls(**value)


#: a schema file's largest size and node count (aliases expanded): a schema lists tables
SCHEMA_MAX_BYTES, SCHEMA_MAX_NODES = 1 << 20, 100_000


def _bound_yaml(file: Path) -> None:
    """Refuse a schema file larger than :data:`SCHEMA_MAX_BYTES`, or whose YAML nodes, each
    alias counted as the node it repeats, exceed :data:`SCHEMA_MAX_NODES` (nested aliases, a
    "billion laughs", would expand exponentially when the file is loaded). The file is
    composed, not constructed: aliases stay references, counted with a memo."""
    import yaml

    size = file.stat().st_size
    if size > SCHEMA_MAX_BYTES:
        raise ConfigError(f"{file}: {size:,} bytes, more than the {SCHEMA_MAX_BYTES:,} a tables "
                          "schema may have: it lists tables, their columns and options")
    try:
        root = yaml.compose(file.read_text(errors="replace"), Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(f"{file}: not a tables schema ({first}); it holds nodes: and edges: "
                          "lists of tables") from None
    sizes: dict[int, int] = {}
    open_: set[int] = set()  # nodes whose children are being counted (a cycle returns to one)
    pending = [] if root is None else [(root, False)]
    while pending:  # post-order without recursion: a node's size is 1 + its children's
        node, done = pending.pop()
        if id(node) in sizes:
            continue
        children = [c for pair in node.value for c in pair] if isinstance(
            node, yaml.MappingNode) else list(node.value) if isinstance(
            node, yaml.SequenceNode) else []
        if done:
            open_.discard(id(node))
            sizes[id(node)] = min(1 + sum(sizes.get(id(c), 0) for c in children),
                                  SCHEMA_MAX_NODES + 1)
        elif id(node) in open_:
            sizes[id(root)] = SCHEMA_MAX_NODES + 1  # an alias inside itself: endless
            break
        else:
            open_.add(id(node))
            pending.append((node, True))
            pending.extend((c, False) for c in children if id(c) not in sizes)
    total = 0 if root is None else sizes[id(root)]
    if total > SCHEMA_MAX_NODES:
        raise ConfigError(f"{file}: its YAML expands to more than {SCHEMA_MAX_NODES:,} values "
                          "(nested aliases?): a tables schema lists tables, their columns and "
                          "options; write them out")


def _read_schema(file: Path) -> tuple[list[NodeTableConfig], list[EdgeTableConfig]]:
    """The node and edge tables of a schema file, checked against :class:`TablesSchema`."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if not file.is_file():
        raise ConfigError(f"dataset.schema: no file {file}")
    _bound_yaml(file)
    try:
        raw = OmegaConf.load(file)
        typed = OmegaConf.merge(OmegaConf.structured(TablesSchema), raw)
        plain = OmegaConf.to_container(typed, resolve=True)
    except (OmegaConfBaseException, ValueError, OSError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(f"{file}: not a tables schema ({first}); it holds nodes: and edges: "
                          "lists of tables") from None
    if not isinstance(plain, dict):
        raise ConfigError(f"{file}: not a tables schema; it holds nodes: and edges: lists of "
                          "tables")
    return [_as(NodeTableConfig, n) for n in plain["nodes"]], \
        [_as(EdgeTableConfig, e) for e in plain["edges"]]


def _check_nulls(table: NodeTableConfig | EdgeTableConfig, key: str) -> None:
    """``nulls``: None or a list of words (the CSV cells that mean "empty" besides the empty
    field); stored as a list of strings."""
    given = table.nulls
    if given is None:
        return
    if isinstance(given, str) or not isinstance(given, (list, tuple)) or not all(
            isinstance(w, (str, int, float)) and not isinstance(w, bool) for w in given):
        raise ConfigError(f"{key}.nulls must be a list of words that mean an empty cell (the "
                          f"empty field always does), e.g. [NA, 'null'], got {given!r}")
    table.nulls = [str(w) for w in given]


def _table_path(path: str | None, base: Path, key: str) -> str:
    """``path`` resolved against ``base``; a missing one is a ConfigError naming ``key``."""
    if not path:
        raise ConfigError(f"{key}.path is missing: name the table's file")
    p = Path(os.path.expanduser(str(path)))
    p = (p if p.is_absolute() else base / p).resolve()
    if not p.is_file():
        raise ConfigError(f"{key}.path: no file {p}")
    return str(p)


def _edge_type(given: Any, node_types: list[str], key: str) -> list[str]:
    """An edge table's ``type`` as ``[source, relation, destination]``: a relation alone (or
    nothing: ``to``) stands for that relation within the only node type."""
    if given is None or isinstance(given, str):
        if len(node_types) != 1:
            raise ConfigError(f"{key}.type must be [source type, relation, destination type] "
                              f"with several node types ({', '.join(node_types)})")
        rel = "to" if given is None else given
        et = [node_types[0], rel, node_types[0]]
    elif isinstance(given, (list, tuple)) and len(given) == 3:
        et = [str(p) for p in given]
    else:
        raise ConfigError(f"{key}.type must be [source type, relation, destination type] or a "
                          f"relation, got {given!r}")
    if not TYPE_NAME.fullmatch(et[1]):
        raise ConfigError(f"{key}.type: relation {et[1]!r} must be letters, digits, '_', '.' or "
                          "'-'")
    for end in (et[0], et[2]):
        if end not in node_types:
            raise ConfigError(f"{key}.type {et} names node type {end!r}, which no node table "
                              f"has (node types: {', '.join(node_types)})")
    return et
