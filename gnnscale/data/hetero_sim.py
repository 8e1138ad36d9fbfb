"""A generated ogbn-mag-like typed graph (``dataset=hetero_sim``), deterministic for a seed, so
every strategy and benchmark runs on a typed graph without downloads.

Schema (ogbn-mag's names and, at ``scale`` 1, its counts; every count is ``scale`` times):

* node types ``paper`` 736,389 (``num_features`` features, labels, the split), ``author``
  1,134,649, ``institution`` 8,740, ``field_of_study`` 59,965 (the last three featureless);
* edge types ``(author, writes, paper)`` about 7.1M, ``(paper, cites, paper)`` about 5.4M,
  ``(author, affiliated_with, institution)`` about 1.0M, ``(paper, has_topic,
  field_of_study)`` about 7.5M, and with ``add_reverse`` a ``rev_`` type for each;
* edge features: ``writes`` has 2 (the author's position on the paper / 10 and whether it is
  the first author), ``cites`` 1 (the years between the two papers / 10); reverse types copy
  them, the other types have none (so they are kept per edge type).

Model: every node has a topic (one per class; topic sizes skewed); a paper's label is its
topic, replaced by a uniform class with probability ``label_noise``; its features are
``feature_signal`` * its class centroid + unit Gaussian noise, so its own features are weak
evidence and its neighbours (mostly of its topic) strong evidence. Each edge's far end is
drawn inside the near end's topic with probability ``p_intra``, else anywhere, in proportion
to Pareto weights (``degree_exponent``), so the far ends' degrees follow a power law: papers
per author, citations per paper, papers per field, authors per institution. A paper has
``1 + Poisson`` authors and fields, ``Poisson`` references; an author ``Poisson``
affiliations. Repeated edges are dropped (so counts are a little under the targets). The
split is by year, as ogbn-mag's: papers up to 2017 train (about 85%), 2018 validate, 2019
test. Generation is vectorised: ``scale`` 0.01 (19k nodes, about 420k edges with reverses)
takes about a second, ``scale`` 1 about a minute.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from gnnscale.data.base import Dataset
from gnnscale.data.graph import GraphStore
from gnnscale.data.schemas import HeteroSimConfig

#: ogbn-mag's node counts (scale 1)
NODES = {"paper": 736_389, "author": 1_134_649, "institution": 8_740,
         "field_of_study": 59_965}
WRITES = ("author", "writes", "paper")
CITES = ("paper", "cites", "paper")
AFFILIATED = ("author", "affiliated_with", "institution")
TOPIC = ("paper", "has_topic", "field_of_study")
#: ogbn-mag's edge counts (scale 1), which the generator aims at
EDGES = {WRITES: 7_145_660, CITES: 5_416_271, AFFILIATED: 1_043_998, TOPIC: 7_505_078}
YEARS = np.arange(2010, 2020)
#: year shares: 2010-2017 rising to 85.5% together, 2018 8.8%, 2019 5.7% (ogbn-mag's split)
YEAR_SHARE = np.concatenate([np.linspace(0.6, 1.4, 8) / 8 * 0.855, [0.088, 0.057]])
#: at most this many times the mean weight (hubs stay below a few percent of an edge type)
MAX_WEIGHT_RATIO = 50.0


def _streams(seed: int) -> list[np.random.Generator]:
    """Independent generators: topics, each edge type, labels, features, years."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(8)]


def _pareto(rng: np.random.Generator, n: int, exponent: float) -> np.ndarray:
    w = (1.0 - rng.random(n)) ** (-1.0 / (exponent - 1.0))
    return np.minimum(w, MAX_WEIGHT_RATIO * w.mean()) if n else w


class _Picker:
    """Draws nodes of one type in proportion to their weights, inside a given topic or
    anywhere (vectorised: one cumulative sum over the nodes sorted by topic)."""

    def __init__(self, weights: np.ndarray, topic: np.ndarray, num_topics: int) -> None:
        self.order = np.argsort(topic, kind="stable")
        self.cum = np.cumsum(weights[self.order])
        self.bounds = np.searchsorted(topic[self.order], np.arange(num_topics + 1))
        lo_cum = np.concatenate([[0.0], self.cum])
        self.lo, self.hi = lo_cum[self.bounds[:-1]], lo_cum[self.bounds[1:]]

    def draw(self, rng: np.random.Generator, topics: np.ndarray, p_intra: float
             ) -> np.ndarray:
        """One node per entry of ``topics``: of that topic with probability ``p_intra`` (when
        the topic has nodes of this type), else of any topic."""
        k = topics.size
        total = self.cum[-1]
        intra = (rng.random(k) < p_intra) & (self.hi[topics] > self.lo[topics])
        lo = np.where(intra, self.lo[topics], 0.0)
        hi = np.where(intra, self.hi[topics], total)
        pos = np.searchsorted(self.cum, lo + rng.random(k) * (hi - lo), side="right")
        last = np.where(intra, self.bounds[topics + 1],
                        self.cum.size) - 1
        first = np.where(intra, self.bounds[topics], 0)
        return self.order[np.clip(pos, first, last)]


def _topics(rng: np.random.Generator, n: int, num_topics: int) -> np.ndarray:
    """Skewed topic sizes (Zipf-like shares, shuffled over the topic ids)."""
    share = (np.arange(num_topics) + 10.0) ** -0.8
    share = share[rng.permutation(num_topics)]
    return rng.choice(num_topics, size=n, p=share / share.sum())


def _per_node(rng: np.random.Generator, n: int, mean: float, at_least_one: bool
              ) -> np.ndarray:
    """How many edges each of ``n`` nodes starts: ``1 + Poisson(mean - 1)`` or
    ``Poisson(mean)``."""
    if at_least_one:
        return 1 + rng.poisson(max(mean - 1.0, 0.0), n)
    return rng.poisson(mean, n)


def _positions(counts: np.ndarray) -> np.ndarray:
    """``0, 1, .., c - 1`` for every count ``c``, concatenated."""
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(int(counts.sum())) - starts


def generate(spec: HeteroSimConfig) -> GraphStore:
    """The graph for the options ``spec`` (see the module docstring)."""
    spec.check()
    scale, k = float(spec.scale), spec.classes
    n = {t: max(1, int(round(c * scale))) for t, c in NODES.items()}
    r_topic, r_w, r_c, r_a, r_t, r_label, r_feat, r_year = _streams(int(spec.seed))
    topic = {t: _topics(r_topic, n[t], k) for t in NODES}
    exp, p = float(spec.degree_exponent), float(spec.p_intra)
    pick = {t: _Picker(_pareto(r_topic, n[t], exp), topic[t], k) for t in NODES}
    year = YEARS[r_year.choice(YEARS.size, size=n["paper"], p=YEAR_SHARE / YEAR_SHARE.sum())]

    # writes: every paper has 1 + Poisson authors, drawn by author weight (paper's topic)
    per = _per_node(r_w, n["paper"], EDGES[WRITES] / NODES["paper"], True)
    paper = np.repeat(np.arange(n["paper"]), per)
    author = pick["author"].draw(r_w, topic["paper"][paper], p)
    pos = _positions(per)
    writes = np.stack([author, paper])
    writes_attr = np.stack([pos / 10.0, pos == 0], axis=1).astype(np.float32)

    # cites: Poisson references per paper, the cited paper drawn by citation weight
    per = _per_node(r_c, n["paper"], EDGES[CITES] / NODES["paper"], False)
    src = np.repeat(np.arange(n["paper"]), per)
    dst = pick["paper"].draw(r_c, topic["paper"][src], p)
    keep = src != dst
    cites = np.stack([src[keep], dst[keep]])
    cites_attr = ((year[cites[0]] - year[cites[1]]) / 10.0).astype(np.float32)[:, None]

    # affiliated_with: Poisson institutions per author, drawn by size (weaker topic tie)
    per = _per_node(r_a, n["author"], EDGES[AFFILIATED] / NODES["author"], False)
    a = np.repeat(np.arange(n["author"]), per)
    affiliated = np.stack([a, pick["institution"].draw(r_a, topic["author"][a], p / 2)])

    # has_topic: 1 + Poisson fields per paper, drawn by field popularity
    per = _per_node(r_t, n["paper"], EDGES[TOPIC] / NODES["paper"], True)
    q = np.repeat(np.arange(n["paper"]), per)
    has_topic = np.stack([q, pick["field_of_study"].draw(r_t, topic["paper"][q], p)])

    y = topic["paper"].copy()
    flip = r_label.random(n["paper"]) < float(spec.label_noise)
    y[flip] = r_label.integers(0, k, int(flip.sum()))
    f = int(spec.num_features)
    centroid = r_feat.standard_normal((k, f), dtype=np.float32) * float(spec.feature_signal)
    x = r_feat.standard_normal((n["paper"], f), dtype=np.float32)
    x += centroid[topic["paper"]]
    ids = np.arange(n["paper"])
    split = {"train_idx": ids[year <= 2017], "val_idx": ids[year == 2018],
             "test_idx": ids[year == 2019]}
    edges = {WRITES: writes, CITES: cites, AFFILIATED: affiliated, TOPIC: has_topic}
    return GraphStore.from_typed(
        n, {et: torch.from_numpy(e.astype(np.int64)) for et, e in edges.items()},
        features={"paper": torch.from_numpy(x)}, y={"paper": torch.from_numpy(y)},
        num_classes=k, edge_attr={WRITES: torch.from_numpy(writes_attr),
                                  CITES: torch.from_numpy(cites_attr)},
        add_reverse=bool(spec.add_reverse), name=f"hetero_sim-x{scale:g}",
        meta={"generator": "hetero_sim", "seed": int(spec.seed), "scale": scale,
              "split_name": "year: <= 2017 / 2018 / 2019"},
        train_idx={"paper": torch.from_numpy(split["train_idx"])},
        val_idx={"paper": torch.from_numpy(split["val_idx"])},
        test_idx={"paper": torch.from_numpy(split["test_idx"])})


class HeteroSimDataset(Dataset):
    """The generator behind the Dataset interface: generated once, then memory-mapped."""

    def __init__(self, root: str = "data", scale: float = 0.01, seed: int = 0,
                 feature_norm: str = "none",
                 memory_budget: int | str | None = None, **knobs: Any) -> None:
        super().__init__(root, feature_norm, memory_budget)
        self.spec = HeteroSimConfig(scale=scale, seed=seed, **knobs)
        self.spec.check()

    @property
    def key(self) -> str:
        """The processed folder's name for this dataset and its options."""
        return self.spec.key()

    def process(self) -> GraphStore:
        """Generate the graph (called once; the result is saved and memory-mapped)."""
        return generate(self.spec)
