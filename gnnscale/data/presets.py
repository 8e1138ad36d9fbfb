"""The synthetic generator's parameters and its presets (torch-free: the launcher resolves a
``dataset=synthetic`` config, and names its processed folder, with these alone).

A preset fills every knob of :class:`SyntheticParams`; :func:`resolve` scales it and applies
the config's overrides, refusing values the generator cannot produce
(:class:`~gnnscale.errors.ConfigError`, the ``dataset.`` key named); :func:`params_key` is
the digest that names the processed copy (``gnnscale/data/synthetic.py`` generates).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from gnnscale.errors import ConfigError

GENERATOR_VERSION = 1


@dataclass(frozen=True)
class SyntheticParams:
    """Every knob of the generator (a preset fills them all)."""

    num_nodes: int
    avg_degree: float
    num_features: int
    num_classes: int
    num_communities: int
    p_intra: float = 0.93
    degree_exponent: float = 2.5
    max_degree_ratio: float = 60.0
    max_intra_share: float = 0.5
    community_size_sigma: float = 0.5
    feature_signal: float = 0.25
    community_signal: float = 0.25
    label_noise: float = 0.1
    train_ratio: float = 0.1
    val_ratio: float = 0.1
    test_ratio: float = 1.0
    train_region: float = 1.0

    @property
    def num_undirected_edges(self) -> int:
        """Edges before symmetrisation."""
        return int(round(self.num_nodes * self.avg_degree / 2))


PRESETS: dict[str, SyntheticParams] = {
    "tiny": SyntheticParams(
        num_nodes=2_000, avg_degree=10.0, num_features=32, num_classes=8, num_communities=20,
        train_ratio=0.3, val_ratio=0.2,
    ),
    "small": SyntheticParams(
        num_nodes=50_000, avg_degree=16.0, num_features=100, num_classes=47,
        num_communities=250,
    ),
    # ogbn-products: 2,449,029 nodes, 61,859,140 undirected edges, 100 features, 47 classes,
    # split 196,615 / 39,323 / 2,213,091.
    "products_sim": SyntheticParams(
        num_nodes=2_449_029, avg_degree=2 * 61_859_140 / 2_449_029, num_features=100,
        num_classes=47, num_communities=2_449, train_ratio=0.0803, val_ratio=0.0161,
    ),
    # Graphs like the seed papers' at a size this host trains (scale=1); `scale` grows them
    # (published statistics beside each in gnnscale/data/paper_graphs.py).
    # ogbn-products at 1/50 of its nodes: mean degree 50.5, 8.03% train; max_degree_ratio
    # 346 = the real max degree (17,481) over its mean; p_intra 0.8 lets hubs spill across
    # communities (0.93 caps the realised max near 1.2k at this size).
    "products_like": SyntheticParams(
        num_nodes=48_981, avg_degree=2 * 61_859_140 / 2_449_029, num_features=100,
        num_classes=47, num_communities=49, p_intra=0.8, max_degree_ratio=346.0,
        train_ratio=0.0803, val_ratio=0.0161,
    ),
    # ogbn-papers100M: |E|/|V| 14.5 (1.6B directed edges as FGNN samples them; the
    # symmetrised graph is avg_degree=29), 1.09% / 0.11% / 0.19% split, all inside a 3% region
    # of whole communities (its labelled papers are the arXiv subset) and p_intra 0.95:
    # 3-hop samples stay near the training set, so degree is a poor proxy for access.
    "papers_like": SyntheticParams(
        num_nodes=100_000, avg_degree=14.5, num_features=128, num_classes=172,
        num_communities=500, p_intra=0.95, train_ratio=0.0109, val_ratio=0.0011,
        test_ratio=0.0019, train_region=0.03,
    ),
    # reddit: mean degree ~490 (NeutronStar 487) at small |V|; large communities so that
    # neighbourhoods fit inside them; 66% / 10% / 24% split.
    "reddit_like": SyntheticParams(
        num_nodes=20_000, avg_degree=490.0, num_features=602, num_classes=41,
        num_communities=10, p_intra=0.8, train_ratio=0.66, val_ratio=0.10,
    ),
    # web-Google (NeutronStar Table 2): mean degree 5.86, small dense communities (sites).
    "web_like": SyntheticParams(
        num_nodes=100_000, avg_degree=5.86, num_features=512, num_classes=16,
        num_communities=2_000, p_intra=0.95, degree_exponent=2.2, train_ratio=0.1,
        val_ratio=0.1,
    ),
}


def resolve(preset: str = "small", scale: float = 1.0, **overrides: Any
            ) -> SyntheticParams:
    """The preset's parameters, scaled, then with every non-None override applied."""
    if preset not in PRESETS:
        raise ConfigError(f"dataset.preset: unknown synthetic preset {preset!r}; choose one of "
                          f"{sorted(PRESETS)}")
    if scale <= 0:
        raise ConfigError(f"dataset.scale must be positive, got {scale}")
    base = PRESETS[preset]
    known = {f.name for f in fields(SyntheticParams)}
    unknown = set(overrides) - known
    if unknown:
        raise ConfigError(f"unknown synthetic options {sorted(unknown)}; known: "
                          f"{sorted(known)}")
    p = replace(
        base,
        num_nodes=max(2, int(round(base.num_nodes * scale))),
        num_communities=max(1, int(round(base.num_communities * scale))),
    )
    p = replace(p, **{k: v for k, v in overrides.items() if v is not None})
    check_params(p)
    return p


def check_params(p: SyntheticParams) -> None:
    """Refuse parameters the generator cannot produce (the `dataset.` keys named)."""
    if p.num_nodes < 2 or p.num_communities < 1 or p.num_communities > p.num_nodes:
        raise ConfigError("need dataset.num_nodes >= 2 and 1 <= dataset.num_communities <= "
                          "num_nodes")
    if p.num_classes < 1 or p.num_features < 1 or p.avg_degree <= 0:
        raise ConfigError("dataset.num_classes, num_features and avg_degree must be positive")
    if p.num_undirected_edges > p.num_nodes * (p.num_nodes - 1) // 4:
        raise ConfigError(f"dataset.avg_degree {p.avg_degree} is too dense for {p.num_nodes} "
                          "nodes")
    if not (0.0 <= p.p_intra <= 1.0 and 0.0 <= p.label_noise <= 1.0):
        raise ConfigError("dataset.p_intra and label_noise must lie in [0, 1]")
    if p.train_ratio <= 0 or p.val_ratio < 0 or p.train_ratio + p.val_ratio >= 1:
        raise ConfigError("need dataset.train_ratio > 0, val_ratio >= 0, train_ratio + val_ratio "
                          "< 1")
    if p.degree_exponent <= 1 or p.max_degree_ratio < 1:
        raise ConfigError("need dataset.degree_exponent > 1 and max_degree_ratio >= 1")
    if not (0.0 <= p.test_ratio <= 1.0 and 0.0 < p.train_region <= 1.0):
        raise ConfigError("dataset.test_ratio must lie in [0, 1] and train_region in (0, 1]")



def params_key(preset: str, scale: float, seed: int, params: SyntheticParams) -> str:
    """The processed folder's name of a generated graph: preset, scale, seed and a digest of
    every parameter (and the generator's version)."""
    blob = json.dumps([GENERATOR_VERSION, asdict(params)], sort_keys=True)
    digest = hashlib.blake2b(blob.encode(), digest_size=4).hexdigest()
    return f"synthetic-{preset}-x{float(scale):g}-seed{int(seed)}-{digest}"
