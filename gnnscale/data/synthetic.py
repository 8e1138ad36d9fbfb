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

Processed through :class:`SyntheticDataset` the graph is generated into the staging folder
(:func:`generate_params` with a stage): features in row chunks, and under the memory budget
(or from :data:`bounded.AUTO_EDGES` edges) the edges deduplicated in key buckets on disk and
the CSC built out of core, so memory is per node plus the budget whatever the edge count; the
graph is bit-identical to the in-memory one for any budget.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnscale.data import bounded
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
    preset: str = "small", scale: float = 1.0, seed: int = 0, **overrides: Any
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
    """Per-node edge-end counts ("stubs") as cumulative sums, intra-community ones grouped by
    community: stub ``s`` of a table belongs to the node ``searchsorted(cum, s, "right")``
    (the table ``repeat(ids, counts)`` never materialised: memory O(nodes), not O(edges)).

    Node ``u`` (internal id) gets a Pareto-distributed expected degree; ``p_intra`` of its stubs
    are intra-community, at most ``max_intra_share`` of its community's size (hubs spill over
    into inter-community edges instead of repeating edges inside a small community).
    Returns (intra cumulative counts, their per-community offsets, inter cumulative counts).
    """
    n = p.num_nodes
    w = (1.0 - rng.random(n)) ** (-1.0 / (p.degree_exponent - 1.0))
    np.minimum(w, p.max_degree_ratio * w.mean(), out=w)
    want = w * (2.0 * p.num_undirected_edges / w.sum())
    del w
    deg = np.floor(want).astype(np.int64)
    deg += rng.random(n) < (want - deg)
    del want
    sizes = np.diff(starts)
    cap = np.floor(p.max_intra_share * np.maximum(sizes - 1, 0)).astype(np.int64)
    intra = _intra_stubs(deg, np.repeat(cap, sizes), p.p_intra)
    offsets = np.zeros(p.num_communities + 1, dtype=np.int64)
    np.cumsum(np.add.reduceat(intra, starts[:-1]) * (sizes > 0), out=offsets[1:])
    deg -= intra
    return np.cumsum(intra), offsets, np.cumsum(deg)


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


def _pair_chunks(p, rng, count, tables, comm_internal) -> Iterator[np.ndarray]:
    """``count`` canonical keys ``min * n + max`` (internal ids), self-loops dropped, drawn
    :data:`_EDGE_CHUNK` pairs at a time (the chunk is part of the graph's definition: the
    draws of one chunk are interleaved).

    The first end is a uniform stub; an intra stub pairs with a uniform intra stub of the same
    community, an inter stub with a uniform inter stub anywhere.
    """
    n = p.num_nodes
    cum_intra, offsets, cum_inter = tables
    n_intra = int(cum_intra[-1]) if cum_intra.size else 0
    n_inter = int(cum_inter[-1]) if cum_inter.size else 0
    for lo in range(0, count, _EDGE_CHUNK):
        k = min(_EDGE_CHUNK, count - lo)
        slot = (rng.random(k) * (n_intra + n_inter)).astype(np.int64)
        r = rng.random(k)
        is_intra = slot < n_intra
        u = np.empty(k, dtype=np.int64)
        v = np.empty(k, dtype=np.int64)
        u[is_intra] = _owners(cum_intra, slot[is_intra])
        c = comm_internal[u[is_intra]]
        a = offsets[c]
        v[is_intra] = _owners(cum_intra, a + (r[is_intra] * (offsets[c + 1] - a)).astype(np.int64))
        del c, a
        is_inter = ~is_intra
        u[is_inter] = _owners(cum_inter, slot[is_inter] - n_intra)
        v[is_inter] = _owners(cum_inter, (r[is_inter] * n_inter).astype(np.int64))
        del slot, r, is_intra, is_inter
        keep = u != v
        u, v = u[keep], v[keep]
        yield np.minimum(u, v) * n + np.maximum(u, v)


def _owners(cum: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """``searchsorted(cum, slots, "right")``: the node owning each stub slot, the slots
    looked up in sorted order (consecutive searches then touch nearby entries of ``cum``,
    which random slots over a large graph's ``cum`` would miss in the CPU cache every time)."""
    order = np.argsort(slots)
    out = np.empty(slots.size, dtype=np.int64)
    out[order] = np.searchsorted(cum, slots[order], side="right")
    return out


def _sample_pairs(p, rng, count, tables, comm_internal) -> np.ndarray:
    """The keys of :func:`_pair_chunks`, in memory."""
    out = list(_pair_chunks(p, rng, count, tables, comm_internal))
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
    if _stub_count(tables) < 2:
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


def _stub_count(tables) -> int:
    return sum(int(t[-1]) for t in (tables[0], tables[2]) if t.size)


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


def _feature_chunks(p: SyntheticParams, rng, comm: np.ndarray, comm_class: np.ndarray,
                    rows: int = _ROW_CHUNK) -> Iterator[np.ndarray]:
    """The feature matrix ``rows`` rows at a time (the same values for any ``rows``: the
    noise is drawn row after row from one stream)."""
    f = p.num_features
    centroid = rng.standard_normal((p.num_classes, f), dtype=np.float32) * p.feature_signal
    offset = rng.standard_normal((p.num_communities, f), dtype=np.float32) * p.community_signal
    base = centroid[comm_class] + offset  # per community
    del centroid, offset
    for lo in range(0, p.num_nodes, rows):
        hi = min(lo + rows, p.num_nodes)
        block = rng.standard_normal((hi - lo, f), dtype=np.float32)
        block += base[comm[lo:hi]]
        yield block


def _features(p: SyntheticParams, rng, comm: np.ndarray, comm_class: np.ndarray) -> np.ndarray:
    x = np.empty((p.num_nodes, p.num_features), dtype=np.float32)
    lo = 0
    for block in _feature_chunks(p, rng, comm, comm_class):
        x[lo:lo + len(block)] = block
        lo += len(block)
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


def generate_params(p: SyntheticParams, seed: int = 0, name: str = "synthetic",
                    stage: bounded.Stage | None = None) -> GraphStore:
    """The graph for fully resolved parameters ``p``. ``stage`` (a dataset's staging folder
    while it is processed): the features are written there in row chunks and, under its
    memory budget (or once the graph passes :data:`bounded.AUTO_EDGES` edges), the edges are
    deduplicated and turned into the CSC out of core (:func:`_streamed_csc`): the same graph,
    in memory bounded by the budget plus per-node arrays."""
    check_params(p)
    r_comm, r_edge, r_label, r_feat, r_split = _streams(seed)
    comm, perm, starts = _communities(p, r_comm)
    region = _region(p, r_comm, starts)
    budget = None if stage is None else \
        bounded.budget_for(stage, 2 * p.num_undirected_edges)
    if budget is None or stage is None:
        keys = _edges(p, r_edge, starts)
        indptr, indices = _csc(keys, perm, p.num_nodes)
        del keys
    else:
        indptr, indices = _streamed_csc(p, r_edge, starts, perm, stage, budget, name)
    del perm
    comm_class, y = _labels(p, r_label, comm)
    if stage is None:
        x = torch.from_numpy(_features(p, r_feat, comm, comm_class))
    else:
        rows = max(1, min(_ROW_CHUNK, stage.chunk_bytes // (4 * p.num_features)))
        x = stage.features(_feature_chunks(p, r_feat, comm, comm_class, rows), p.num_nodes,
                           p.num_features)
    train_idx, val_idx, test_idx = _split(p, r_split, region[comm])
    return GraphStore(
        indptr=indptr, indices=indices, x=x, y=torch.from_numpy(y),
        train_idx=train_idx, val_idx=val_idx, test_idx=test_idx,
        num_classes=p.num_classes, name=name,
        meta={"generator": "synthetic", "version": GENERATOR_VERSION, "seed": seed,
              "params": asdict(p)},
    )


class _KeyBuckets:
    """Canonical edge keys on disk, one file per key range (ranges of the smaller end's id,
    sized so that a bucket's expected keys take a fraction of ``budget`` while sorted)."""

    def __init__(self, folder: Path, n: int, target: int, budget: int) -> None:
        self.folder, self.n = folder, n
        folder.mkdir(parents=True, exist_ok=True)
        cap = max(1 << 10, budget // 40)  # keys a bucket holds while sorted (~22 bytes each)
        nb = max(1, min(n, math.ceil(2 * target / cap)))
        # the smaller end of a uniform pair falls below x * n with probability 1 - (1 - x)^2
        lo = np.floor((1.0 - np.sqrt(1.0 - np.arange(nb) / nb)) * n).astype(np.int64)
        self.bounds = np.unique(lo) * n  # first key of each bucket
        self.counts = np.zeros(self.bounds.size, dtype=np.int64)

    def file(self, b: int) -> Path:
        return self.folder / f"{b}.keys"

    def add(self, keys: np.ndarray) -> None:
        """Append ``keys`` to their buckets' files."""
        b = np.searchsorted(self.bounds, keys, side="right") - 1
        order = np.argsort(b, kind="stable")
        b, keys = b[order], keys[order]
        cuts = np.flatnonzero(np.diff(b)) + 1
        for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), b.size]):
            if hi > lo:
                with open(self.file(int(b[lo])), "ab") as f:
                    f.write(keys[lo:hi].tobytes())

    def dedupe(self) -> int:
        """Sort and deduplicate every bucket in place; returns the distinct keys in all."""
        for b in range(self.bounds.size):
            if self.file(b).exists():
                keys = _sorted_unique(np.fromfile(self.file(b), dtype=np.int64))
                keys.tofile(self.file(b))
                self.counts[b] = keys.size
                del keys
                bounded.trim()
        return int(self.counts.sum())

    def drop(self, positions: np.ndarray) -> None:
        """Remove the keys at sorted global ``positions`` (in key order)."""
        ends = np.cumsum(self.counts)
        for b in range(self.bounds.size):
            a, e = int(ends[b] - self.counts[b]), int(ends[b])
            mine = positions[(positions >= a) & (positions < e)] - a
            if mine.size:
                keys = np.fromfile(self.file(b), dtype=np.int64)
                keep = np.ones(keys.size, dtype=bool)
                keep[mine] = False
                keys = keys[keep]
                keys.tofile(self.file(b))
                self.counts[b] = keys.size
                del keys, keep

    def chunks(self, rows: int) -> Iterator[np.ndarray]:
        """Every key in order, ``rows`` at a time."""
        for b in range(self.bounds.size):
            for a in range(0, int(self.counts[b]), rows):
                yield np.fromfile(self.file(b), dtype=np.int64, count=rows, offset=8 * a)


def _streamed_csc(p: SyntheticParams, rng, starts: np.ndarray, perm: np.ndarray,
                  stage: bounded.Stage, budget: int, name: str
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_edges` then :func:`_csc` out of core, bit-identical: the sampled keys are
    appended to bucket files by key range (:class:`_KeyBuckets`), each bucket deduplicated
    alone, resampled and trimmed exactly as in memory, then streamed (relabelled to ids) into
    :func:`bounded.stage_csc`, which writes ``indices`` into the stage."""
    n, target = p.num_nodes, p.num_undirected_edges
    folder = stage.folder / "synthetic_keys"
    kb = _KeyBuckets(folder, n, target, budget)
    if target:
        tables = _stubs(p, rng, starts)
        if _stub_count(tables) < 2:
            raise ValueError(f"avg_degree {p.avg_degree} gives no edges for {n} nodes")
        comm_internal = np.repeat(np.arange(p.num_communities), np.diff(starts))
        count = target
        for _ in range(51):
            for keys in _pair_chunks(p, rng, count, tables, comm_internal):
                kb.add(keys)
            bounded.trim()
            total = kb.dedupe()
            if total >= target:
                break
            count = int((target - total) * 1.5) + 64
        else:
            raise ValueError(f"could not place {target} distinct edges: lower avg_degree or "
                             "p_intra")
        del tables, comm_internal
        if total > target:
            kb.drop(np.sort(rng.choice(total, total - target, replace=False)))
    rows = bounded.edge_rows(budget)

    def edges() -> Iterator[bounded.Chunk]:
        for keys in kb.chunks(rows):
            yield perm[keys // n], perm[keys % n], None, None, None
    indptr, out = bounded.stage_csc(stage, edges, n, True, "keep", False, budget, torch.int64,
                                    False, 1, name)
    shutil.rmtree(folder, ignore_errors=True)
    return indptr, out["indices"]


def generate(preset: str = "small", scale: float = 1.0, seed: int = 0,
             **overrides: Any) -> GraphStore:
    """Generate a synthetic graph in memory (no caching); see the module docstring."""
    return generate_params(resolve(preset, scale, **overrides), seed, name=_name(preset, scale))


def _name(preset: str, scale: float) -> str:
    return f"synthetic-{preset}" + (f"x{scale:g}" if scale != 1 else "")


class SyntheticDataset(Dataset):
    """The generator behind the Dataset interface: generated once (streamed into the staging
    folder: :func:`generate_params` with a stage), then memory-mapped."""

    streams = True

    def __init__(self, root: str = "data", preset: str = "small", scale: float = 1.0,
                 seed: int = 0, feature_norm: str = "none",
                 memory_budget: int | str | None = None, **overrides: Any) -> None:
        super().__init__(root, feature_norm, memory_budget)
        self.preset, self.scale, self.seed = preset, float(scale), int(seed)
        self.params = resolve(preset, self.scale, **overrides)

    @property
    def key(self) -> str:
        """The processed folder's name for this dataset and its options."""
        return params_key(self.preset, self.scale, self.seed, self.params)

    def process(self) -> GraphStore:
        """Read the raw files into a graph (called once; the result is saved and memory-mapped)."""
        return generate_params(self.params, self.seed, name=_name(self.preset, self.scale),
                               stage=self.stage)


