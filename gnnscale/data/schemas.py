"""Typed schemas of the ``dataset`` options (torch-free: the launcher composes and checks a
config with these alone; each ``_target_`` names the loader that produces the graph)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gnnscale.registry import register


class FeatureNorm(str, Enum):
    """A transform of the input features, applied once when the dataset is processed."""

    none = "none"
    row = "row"  # each row divided by its sum (Kipf & Welling; PyG's NormalizeFeatures)


@dataclass
class DatasetConfig:
    """Fields every dataset option shares."""

    _target_: str = ""
    root: str = "${data_root}"
    feature_norm: FeatureNorm = FeatureNorm.none


@dataclass
class RawDatasetConfig(DatasetConfig):
    """Fields of a dataset read from raw files: which one, and where its files are (None:
    ``<root>/<name>/raw``, then the shared datasets folder)."""

    name: str = ""
    raw_dir: str | None = None


@register("dataset", "planetoid")
@dataclass
class PlanetoidConfig(RawDatasetConfig):
    """Options ``cora``, ``citeseer``, ``pubmed``."""

    _target_: str = "gnnscale.data.planetoid.PlanetoidDataset"
    name: str = "Cora"


@register("dataset", "npz")
@dataclass
class NpzConfig(RawDatasetConfig):
    """Options ``computers``, ``photo``, ``cs``, ``physics``."""

    _target_: str = "gnnscale.data.npz.NpzDataset"
    name: str = "computers"
    train_per_class: int = 20
    val_per_class: int = 30
    split_seed: int = 0
    largest_component: bool = False  # Shchur et al.'s standardisation


@register("dataset", "heterophilous")
@dataclass
class HeterophilousConfig(RawDatasetConfig):
    """Option ``tolokers``."""

    _target_: str = "gnnscale.data.heterophilous.HeterophilousDataset"
    name: str = "tolokers"
    split: int = 0


@register("dataset", "ogb")
@dataclass
class OgbConfig(RawDatasetConfig):
    """Options ``arxiv``, ``products``, ``papers100m``."""

    _target_: str = "gnnscale.data.ogb.OgbNodeDataset"
    name: str = "arxiv"
    symmetrize: bool = True


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
