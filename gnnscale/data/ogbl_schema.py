"""Typed schema of the OGB link-prediction datasets (``dataset=collab|ppa|ddi|citation2``):
torch-free, so the launcher composes without importing torch (loader: ``ogbl.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from gnnscale.registry import register


@register("dataset", "ogbl")
@dataclass
class OgblConfig:
    """Options ``collab``, ``ppa``, ``ddi``, ``citation2``: an ``ogbl-*`` graph and its
    published edge split (``task=link`` scores it as given)."""

    _target_: str = "gnnscale.data.ogbl.OgbLinkDataset"
    root: str = "${data_root}"
    feature_norm: str = "none"  # none | row
    name: str = "collab"
    raw_dir: str | None = None  # <dataset dir>/raw; None: <root>/ogbl_<name>/raw, then shared
    symmetrize: bool | None = None  # None: the OGB default (undirected but citation2)
