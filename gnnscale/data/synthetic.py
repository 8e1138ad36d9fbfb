"""Synthetic graphs with community structure, power-law degrees and predictable labels.

Model (degree-corrected Chung-Lu with communities), deterministic for a seed:

* nodes fall into ``num_communities`` communities of lognormal-varying size, node ids shuffled
  (a community is not a contiguous id range);
* every node gets a Pareto weight (``degree_exponent``, capped at ``max_degree_ratio`` times
  the mean); an edge is intra-community with probability ``p_intra`` (first endpoint drawn by
  weight over all nodes, the second by weight inside its community), otherwise both endpoints
  are drawn by weight over all nodes. Self-loops and repeats are dropped and resampled until
  exactly ``num_nodes * avg_degree / 2`` undirected edges remain; the CSC holds both directions;
* every community has a class (balanced over classes); a node's label is its community's class,
  replaced by a uniform class with probability ``label_noise``;
* features = ``feature_signal`` * class centroid + ``community_signal`` * community offset +
  unit Gaussian noise, so one node's features are weak evidence and averaging over its
  (mostly same-community) neighbours is strong evidence;
* a random train/val/test split by ``train_ratio``/``val_ratio``/``test_ratio`` (test = the
  rest by default), optionally drawn from a ``train_region`` of whole communities first.

Presets ``tiny`` (tests), ``small`` (default run), ``products_sim`` (ogbn-products scale) and
the papers' graphs at a trainable size: ``products_like``, ``papers_like``, ``reddit_like`` and
``web_like`` (docs/presets.md); ``scale`` multiplies nodes and communities (edges follow,
average degree is kept). ``test_ratio`` caps the test split (1: the rest); ``train_region`` < 1
draws the splits from whole communities holding that share of the nodes first (a clustered
training set, as papers100M's labelled arXiv papers).
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import torch

from gnnscale.data.base import Dataset
from gnnscale.data.graph import GraphStore
from gnnscale.data.presets import (  # noqa: F401 - PRESETS re-exported
    GENERATOR_VERSION,
    PRESETS,
    SyntheticParams,
    check_params,
    params_key,
    resolve,
)

_EDGE_CHUNK = 1 << 22
_ROW_CHUNK = 1 << 18


def _streams(seed: int) -> list[np.random.Generator]:
    """Independent generators: communities, edges, labels, features, split."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(5)]


def communities(
    preset: str = "small", scale: float = 1.0, seed: int = 0, **overrides
) -> np.ndarray:
    """Community of every node (by node id) of the graph ``generate`` builds with these args."""
    return _communities(resolve(preset, scale, **overrides), _streams(seed)[0])[0]


def _communities(p: SyntheticParams, rng: np.random.Generator):
    """(community by node id, internal->id permutation, internal community start offsets)."""
    share = rng.lognormal(0.0, p.community_size_sigma, p.num_communities)
    sizes = rng.multinomial(p.num_nodes, share / share.sum())
    starts = np.zeros(p.num_communities + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    perm = rng.permutation(p.num_nodes)  # internal position -> node id
    comm = np.empty(p.num_nodes, dtype=np.int64)
    comm[perm] = np.repeat(np.arange(p.num_communities), sizes)
    return comm, perm, starts


def _region(p: SyntheticParams, rng, starts: np.ndarray) -> np.ndarray:
    """Which communities form the training region: whole communities in random order until
    they hold ``train_region`` of all nodes (every community when ``train_region`` is 1)."""
    k = p.num_communities
    if p.train_region >= 1.0:
        return np.ones(k, dtype=bool)
    order = rng.permutation(k)
    held = np.cumsum(np.diff(starts)[order])
    take = int(np.searchsorted(held, p.train_region * p.num_nodes)) + 1
    region = np.zeros(k, dtype=bool)
    region[order[:take]] = True
    return region


def _stubs(p: SyntheticParams, rng, starts: np.ndarray):
    """Per-node edge-end tables ("stubs"), intra-community ones grouped by community.

    Node ``u`` (internal id) gets a Pareto-distributed expected degree; ``p_intra`` of its stubs
    are intra-community, at most ``max_intra_share`` of its community's size (hubs spill over
    into inter-community edges instead of repeating edges inside a small community).
    Returns (intra table, its per-community offsets, inter table).
    """
    n = p.num_nodes
    w = (1.0 - rng.random(n)) ** (-1.0 / (p.degree_exponent - 1.0))
    np.minimum(w, p.max_degree_ratio * w.mean(), out=w)
    want = w * (2.0 * p.num_undirected_edges / w.sum())
    deg = np.floor(want).astype(np.int64)
    deg += rng.random(n) < (want - deg)
    sizes = np.diff(starts)
    cap = np.floor(p.max_intra_share * np.maximum(sizes - 1, 0)).astype(np.int64)
    intra = _intra_stubs(deg, np.repeat(cap, sizes), p.p_intra)
    dtype = np.int32 if n < 2**31 else np.int64
    ids = np.arange(n, dtype=dtype)
    intra_table = np.repeat(ids, intra)
    offsets = np.zeros(p.num_communities + 1, dtype=np.int64)
    np.cumsum(np.add.reduceat(intra, starts[:-1]) * (sizes > 0), out=offsets[1:])
    return intra_table, offsets, np.repeat(ids, deg - intra)


def _intra_stubs(deg: np.ndarray, cap: np.ndarray, p_intra: float) -> np.ndarray:
    """Intra stubs per node: ``min(q * deg, cap)`` with ``q`` raised (bisection) until the
    total is ``p_intra`` of all stubs, so capped hubs do not lower the intra-edge fraction."""
    want = p_intra * deg.sum()
    lo, hi = p_intra, 1.0
    if np.minimum(hi * deg, cap).sum() > want:
        for _ in range(30):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if np.minimum(mid * deg, cap).sum() < want else (lo, mid)
    return np.minimum(np.rint(hi * deg), cap).astype(np.int64)


def _sample_pairs(p, rng, count, tables, comm_internal) -> np.ndarray:
    """``count`` canonical keys ``min * n + max`` (internal ids), self-loops dropped.

    The first end is a uniform stub; an intra stub pairs with a uniform intra stub of the same
    community, an inter stub with a uniform inter stub anywhere.
    """
    n = p.num_nodes
    intra, offsets, inter = tables
    out = []
    for lo in range(0, count, _EDGE_CHUNK):
        k = min(_EDGE_CHUNK, count - lo)
        slot = (rng.random(k) * (intra.size + inter.size)).astype(np.int64)
        r = rng.random(k)
        is_intra = slot < intra.size
        u = np.empty(k, dtype=np.int64)
        v = np.empty(k, dtype=np.int64)
        s_in = slot[is_intra]
        u[is_intra] = intra[s_in]
        c = comm_internal[u[is_intra]]
        a = offsets[c]
        v[is_intra] = intra[a + (r[is_intra] * (offsets[c + 1] - a)).astype(np.int64)]
        is_inter = ~is_intra
        u[is_inter] = inter[slot[is_inter] - intra.size]
        v[is_inter] = inter[(r[is_inter] * inter.size).astype(np.int64)]
        keep = u != v
        u, v = u[keep], v[keep]
        out.append(np.minimum(u, v) * n + np.maximum(u, v))
    return np.concatenate(out) if out else np.empty(0, dtype=np.int64)


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct values (np.unique is much slower on large int64 arrays here)."""
    keys.sort(kind="stable")
    if keys.size < 2:
        return keys
    new = np.empty(keys.size, dtype=bool)
    new[0] = True
    np.not_equal(keys[1:], keys[:-1], out=new[1:])
    return keys[new]


def _edges(p: SyntheticParams, rng, starts: np.ndarray) -> np.ndarray:
    """Exactly ``num_undirected_edges`` distinct canonical keys over internal ids."""
    target = p.num_undirected_edges
    if target == 0:
        return np.empty(0, dtype=np.int64)
    tables = _stubs(p, rng, starts)
    if tables[0].size + tables[2].size < 2:
        raise ValueError(f"avg_degree {p.avg_degree} gives no edges for {p.num_nodes} nodes")
    comm_internal = np.repeat(np.arange(p.num_communities), np.diff(starts))
    keys = _sorted_unique(_sample_pairs(p, rng, target, tables, comm_internal))
    for _ in range(50):
        if keys.size >= target:
            break
        extra = int((target - keys.size) * 1.5) + 64
        more = _sorted_unique(_sample_pairs(p, rng, extra, tables, comm_internal))
        keys = _sorted_unique(np.concatenate([keys, more]))
    else:
        raise ValueError(f"could not place {target} distinct edges: lower avg_degree or p_intra")
    if keys.size > target:
        drop = rng.choice(keys.size, keys.size - target, replace=False)
        keep = np.ones(keys.size, dtype=bool)
        keep[drop] = False
        keys = keys[keep]
    return keys


def _csc(keys: np.ndarray, perm: np.ndarray, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Both directions of the canonical internal keys, relabelled to ids, as CSC."""
    both = np.empty(2 * keys.size, dtype=np.int64)
    u = perm[keys // n]
    v = perm[keys % n]
    np.multiply(v, n, out=both[: keys.size])
    both[: keys.size] += u
    np.multiply(u, n, out=both[keys.size:])
    both[keys.size:] += v
    del u, v
    both.sort()
    indptr = np.searchsorted(both, np.arange(n + 1, dtype=np.int64) * n)
    np.remainder(both, n, out=both)
    return torch.from_numpy(indptr.astype(np.int64)), torch.from_numpy(both)


def _labels(p: SyntheticParams, rng, comm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(class of every community, label of every node)."""
    comm_class = rng.permutation(np.arange(p.num_communities) % p.num_classes)
    y = comm_class[comm]
    flip = rng.random(p.num_nodes) < p.label_noise
    y[flip] = rng.integers(0, p.num_classes, int(flip.sum()))
    return comm_class, y


def _features(p: SyntheticParams, rng, comm: np.ndarray, comm_class: np.ndarray) -> np.ndarray:
    f = p.num_features
    centroid = rng.standard_normal((p.num_classes, f), dtype=np.float32) * p.feature_signal
    offset = rng.standard_normal((p.num_communities, f), dtype=np.float32) * p.community_signal
    base = centroid[comm_class] + offset  # per community
    x = np.empty((p.num_nodes, f), dtype=np.float32)
    for lo in range(0, p.num_nodes, _ROW_CHUNK):
        hi = min(lo + _ROW_CHUNK, p.num_nodes)
        rng.standard_normal((hi - lo, f), dtype=np.float32, out=x[lo:hi])
        x[lo:hi] += base[comm[lo:hi]]
    return x


def _split(p: SyntheticParams, rng, in_region: np.ndarray) -> tuple[torch.Tensor, ...]:
    """Random train/val/test ids; with a training region (``in_region`` by node id, not all
    True) the splits fill the region's nodes first, then the rest."""
    if p.train_region >= 1.0:
        order = rng.permutation(p.num_nodes)
    else:
        inside = np.flatnonzero(in_region)
        outside = np.flatnonzero(~in_region)
        order = np.concatenate([inside[rng.permutation(inside.size)],
                                outside[rng.permutation(outside.size)]])
    n_train = max(1, int(round(p.train_ratio * p.num_nodes)))
    n_val = int(round(p.val_ratio * p.num_nodes))
    n_test = min(p.num_nodes - n_train - n_val, int(round(p.test_ratio * p.num_nodes)))
    parts = np.split(order[: n_train + n_val + n_test], [n_train, n_train + n_val])
    return tuple(torch.from_numpy(np.sort(part).astype(np.int64)) for part in parts)


def generate_params(p: SyntheticParams, seed: int = 0, name: str = "synthetic") -> GraphStore:
    """The graph for fully resolved parameters ``p``."""
    check_params(p)
    r_comm, r_edge, r_label, r_feat, r_split = _streams(seed)
    comm, perm, starts = _communities(p, r_comm)
    region = _region(p, r_comm, starts)
    keys = _edges(p, r_edge, starts)
    indptr, indices = _csc(keys, perm, p.num_nodes)
    del keys
    comm_class, y = _labels(p, r_label, comm)
    x = _features(p, r_feat, comm, comm_class)
    train_idx, val_idx, test_idx = _split(p, r_split, region[comm])
    return GraphStore(
        indptr=indptr, indices=indices, x=torch.from_numpy(x), y=torch.from_numpy(y),
        train_idx=train_idx, val_idx=val_idx, test_idx=test_idx,
        num_classes=p.num_classes, name=name,
        meta={"generator": "synthetic", "version": GENERATOR_VERSION, "seed": seed,
              "params": asdict(p)},
    )


def generate(preset: str = "small", scale: float = 1.0, seed: int = 0, **overrides) -> GraphStore:
    """Generate a synthetic graph in memory (no caching); see the module docstring."""
    return generate_params(resolve(preset, scale, **overrides), seed, name=_name(preset, scale))


def _name(preset: str, scale: float) -> str:
    return f"synthetic-{preset}" + (f"x{scale:g}" if scale != 1 else "")


class SyntheticDataset(Dataset):
    """The generator behind the Dataset interface: generated once, then memory-mapped."""

    def __init__(self, root: str = "data", preset: str = "small", scale: float = 1.0,
                 seed: int = 0, feature_norm: str = "none",
                 memory_budget: int | str | None = None, **overrides) -> None:
        super().__init__(root, feature_norm, memory_budget)
        self.preset, self.scale, self.seed = preset, float(scale), int(seed)
        self.params = resolve(preset, self.scale, **overrides)

    @property
    def key(self) -> str:
        """The processed folder's name for this dataset and its options."""
        return params_key(self.preset, self.scale, self.seed, self.params)

    def process(self) -> GraphStore:
        """Read the raw files into a graph (called once; the result is saved and memory-mapped)."""
        return generate_params(self.params, self.seed, name=_name(self.preset, self.scale))


