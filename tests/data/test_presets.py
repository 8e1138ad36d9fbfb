"""Paper-like synthetic presets: published statistics, determinism, FGNN's cache ordering."""

from __future__ import annotations

import pytest
import torch

from benchmarks.cache import hit_rates
from gnnscale.data import processed
from gnnscale.data.paper_graphs import PUBLISHED, closeness, graph_stats
from gnnscale.data.synthetic import PRESETS, communities, generate, resolve
from gnnscale.sampling.neighbor import NeighborSampler

# small enough for a fast test; avg degree and split shares do not depend on scale
TINY_SCALE = {"products_like": 0.1, "papers_like": 0.1, "reddit_like": 0.1, "web_like": 0.05}


@pytest.mark.parametrize("preset", sorted(TINY_SCALE))
def test_preset_statistics_match_the_published_ones(preset):
    g = generate(preset, scale=TINY_SCALE[preset], seed=0)
    p = resolve(preset, TINY_SCALE[preset])
    stats, pub = graph_stats(g), PUBLISHED[preset]
    assert stats["num_nodes"] == p.num_nodes and stats["num_edges"] == 2 * p.num_undirected_edges
    assert stats["avg_degree"] == pytest.approx(pub["avg_degree"], rel=0.02)
    if "train_fraction" in pub:
        assert stats["train_fraction"] == pytest.approx(pub["train_fraction"], rel=0.05)
    close = closeness(stats, pub)
    assert close["avg_degree"] == pytest.approx(1.0, rel=0.02)
    assert stats["max_degree"] > 4 * stats["avg_degree"] or preset == "reddit_like"
    assert not bool((g.edge_index()[0] == g.edge_index()[1]).any()), "self-loops"


def test_presets_keep_the_old_ones_and_scale_up():
    assert {"tiny", "small", "products_sim", *TINY_SCALE} <= set(PRESETS)
    full = resolve("products_like", scale=2_449_029 / 48_981)
    assert full.num_nodes == 2_449_029 and abs(full.num_undirected_edges - 61_859_140) <= 2


def test_papers_like_splits_are_small_and_clustered():
    p = resolve("papers_like", 0.1)
    g = generate("papers_like", scale=0.1, seed=0)
    n = g.num_nodes
    assert g.val_idx.numel() == round(p.val_ratio * n)
    assert g.test_idx.numel() == round(p.test_ratio * n)  # not "the rest"
    split = torch.cat([g.train_idx, g.val_idx, g.test_idx])
    assert split.unique().numel() == split.numel()
    comm = torch.from_numpy(communities("papers_like", scale=0.1, seed=0))
    train_comms = comm[g.train_idx].unique().numel()
    # a 3% region of whole communities: far fewer communities than a uniform 1.1% draw hits
    assert train_comms <= 0.1 * p.num_communities


def test_presets_are_deterministic_by_seed():
    a = generate("papers_like", scale=0.05, seed=4)
    b = generate("papers_like", scale=0.05, seed=4)
    c = generate("papers_like", scale=0.05, seed=5)
    assert processed.checksum(a) == processed.checksum(b)
    assert torch.equal(a.train_idx, b.train_idx)
    assert processed.checksum(a) != processed.checksum(c)


def test_bad_split_options_are_refused():
    with pytest.raises(ValueError, match="train_region"):
        resolve("papers_like", train_region=0.0)
    with pytest.raises(ValueError, match="test_ratio"):
        resolve("papers_like", test_ratio=1.5)


def test_papers_like_presample_beats_degree_as_in_fgnn():
    """FGNN Fig. 11(b) at a 5% cache (3-hop 15,10,5): PreSC far above Degree, Random ~5%."""
    g = generate("papers_like", scale=0.2, seed=0)
    cfg = {"presample_epochs": 1, "measured_epochs": 1, "seed": 0}
    rates = hit_rates(g, NeighborSampler([15, 10, 5]), cfg, batch_size=16)
    pre, deg = rates["presample"]["0.05"]["hit_rate"], rates["degree"]["0.05"]["hit_rate"]
    assert pre >= 0.85 and deg <= 0.35 and pre > 2 * deg
    assert rates["random"]["0.05"]["hit_rate"] < 0.1
