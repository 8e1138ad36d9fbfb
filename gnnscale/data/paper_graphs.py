"""Published statistics of the seed papers' graphs beside the synthetic presets that mimic them.

``PUBLISHED[preset]`` holds the original graph's figures as the papers in
``/work/shared/papers`` (and OGB, where named) report them, each entry naming its source;
:func:`graph_stats` measures the same figures on a generated graph, and :func:`closeness`
puts the two side by side (measured / published) for the scale-free figures: mean degree,
max degree over mean degree and training fraction. |V| and |E| differ by design (the presets
are scaled down; ``scale`` grows them).
"""

from __future__ import annotations

from gnnscale.data.graph import GraphStore

PUBLISHED: dict[str, dict] = {
    "products_like": {
        "original": "ogbn-products",
        "num_nodes": 2_449_029, "num_edges": 123_718_280, "avg_degree": 50.5,
        "max_degree": 17_481, "train_fraction": 0.0803,
        "source": "OGB ogbn-products (FGNN ref. [3]); 2.4M / 123.7M / d 51 / train 0.08 in "
                  "DeepGalois Table 1, 62M undirected in HongTu Table 4 and GSplit Table 3; "
                  "max degree 17,481 is OGB's figure, not in the papers",
    },
    "papers_like": {
        "original": "ogbn-papers100M",
        "num_nodes": 111_059_956, "num_edges": 1_615_685_872, "avg_degree": 14.5,
        "train_fraction": 0.011,
        "presample_hit_rate": {"0.05": 0.96}, "degree_hit_rate_below": {"0.05": 0.29},
        "random_hit_rate_below": {"0.05": 0.05},
        "source": "FGNN (GNNLab) Table 3 (111M vertices, 1.6B edges as sampled, d = 14.5; "
                  "DeepGalois Table 1: 3.2B symmetrised, d 29), FGNN section 3 (1.1% train), "
                  "FGNN Fig. 11(b) and section 6.3 (3-hop random sampling 15,10,5: PreSC 96% "
                  "at a 5% cache, Degree below 29%, Random below 5%)",
    },
    "reddit_like": {
        "original": "reddit",
        "num_nodes": 232_965, "num_edges": 114_615_892, "avg_degree": 487.0,
        "train_fraction": 0.66,
        "source": "NeutronStar Table 2 (0.23M, 114M, avg deg 487, 602 features, 41 labels); "
                  "HongTu Table 4 (0.23M, 114M); DeepGalois Table 1 (train 0.66; it lists a "
                  "sparser 11.6M-edge reddit, d 50)",
    },
    "web_like": {
        "original": "web-Google",
        "num_nodes": 875_713, "num_edges": 5_105_039, "avg_degree": 5.86,
        "source": "NeutronStar Table 2 (Google: 0.87M, 5.1M, avg deg 5.86, 512 features, "
                  "16 labels; exact counts from SNAP web-Google); no split is published "
                  "(the preset uses 10% train)",
    },
}


def graph_stats(graph: GraphStore) -> dict:
    """|V|, |E| (stored directed edges), mean and max in-degree, training fraction."""
    deg = graph.in_degree()
    n = graph.num_nodes
    train = 0 if graph.train_idx is None else graph.train_idx.numel()
    return {"num_nodes": n, "num_edges": graph.num_edges,
            "avg_degree": graph.num_edges / max(1, n), "max_degree": int(deg.max()),
            "train_fraction": train / max(1, n)}


def closeness(stats: dict, published: dict) -> dict:
    """Measured over published for the figures that do not depend on scale (None: not
    published); ``max_over_avg`` compares the reach of the degree tail."""
    out: dict = {}
    for key in ("avg_degree", "train_fraction"):
        if key in published:
            out[key] = stats[key] / published[key]
    if "max_degree" in published:
        out["max_over_avg"] = ((stats["max_degree"] / stats["avg_degree"])
                               / (published["max_degree"] / published["avg_degree"]))
    return out
