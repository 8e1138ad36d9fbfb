"""Suite ``presets``: the paper-like synthetic graphs beside their originals, and cache hit rates.

For each preset (``products_like``, ``papers_like``, ``reddit_like``, ``web_like``;
:mod:`gnnscale.data.synthetic`) the suite records the graph's statistics next to the published
ones (:mod:`gnnscale.data.paper_graphs`, sources named there) and the hit rate of every cache
policy (presample, degree, random, oracle) at several cache ratios, measured exactly as suite
``cache`` measures them (:func:`benchmarks.cache.hit_rates`: a FeatureStore serves the input
rows of every batch of real sampled epochs). Sampling follows FGNN Fig. 11(b): 3-hop random
neighbour sampling with fanouts 15, 10, 5, PreSC#1, and FGNN's batch of 8000 seeds scaled by
the preset's size over its original's (the share of the graph one batch starts from; for
papers_like about 150 batches per epoch, as 1.2M training vertices / 8000).

Keys: ``results.presets.<preset>.<policy>_hit_rate.<ratio>``, ``results.presets.<preset>.stats``
and ``.published``; ``ratios.presets.<preset>`` holds measured / published figures and, for
papers_like, the FGNN Fig. 11(b) targets (presample >= 0.90 and degree <= 0.35 at a 5% cache).
"""

from __future__ import annotations

import time

from benchmarks import ratio
from benchmarks.cache import POLICIES, hit_rates
from gnnscale.data.paper_graphs import PUBLISHED, closeness, graph_stats
from gnnscale.data.synthetic import generate

PRESETS = ("products_like", "papers_like", "reddit_like", "web_like")
FANOUTS = [15, 10, 5]
FGNN_BATCH = 8000  # FGNN section 7.1: batch size 8000 for every model and graph
TARGET_PRESAMPLE_AT_5 = 0.90
TARGET_DEGREE_AT_5 = 0.35


def settings(quick: bool) -> dict:
    """Scale per preset, FGNN's batch size (scaled per graph) and epochs; quick shrinks
    the graphs."""
    scales = ({"products_like": 0.5, "papers_like": 0.5, "reddit_like": 0.25, "web_like": 0.5}
              if quick else {p: 1.0 for p in PRESETS})
    return {"scales": scales, "fanouts": FANOUTS,
            "fgnn_batch": FGNN_BATCH,
            "presample_epochs": 1, "measured_epochs": 2 if quick else 3, "seed": 0}


def preset_report(preset: str, cfg: dict) -> tuple[dict, dict]:
    """(results, ratios) of one preset: statistics, published figures, hit rates."""
    from gnnscale.sampling.neighbor import NeighborSampler

    t0 = time.perf_counter()
    graph = generate(preset, scale=cfg["scales"][preset], seed=cfg["seed"])
    gen_s = time.perf_counter() - t0
    share = graph.num_nodes / PUBLISHED[preset]["num_nodes"]
    batch_size = max(1, round(cfg["fgnn_batch"] * share))
    rates = hit_rates(graph, NeighborSampler(cfg["fanouts"]), cfg, batch_size)
    stats = {**graph_stats(graph), "batch_size": batch_size, "generate_s": round(gen_s, 2),
             "hit_rate_s": round(time.perf_counter() - t0 - gen_s, 2)}
    published = PUBLISHED[preset]
    res: dict = {"stats": stats, "published": published}
    for pol in POLICIES:
        res[f"{pol}_hit_rate"] = {r: v["hit_rate"] for r, v in rates[pol].items()}
    rat: dict = {f"{k}_vs_published": v for k, v in closeness(stats, published).items()}
    rat["presample_vs_oracle"] = {r: ratio(res["presample_hit_rate"][r], v)
                                  for r, v in res["oracle_hit_rate"].items()}
    if "presample_hit_rate" in published:
        pre, deg = res["presample_hit_rate"]["0.05"], res["degree_hit_rate"]["0.05"]
        rat["presample_vs_fgnn_0.05"] = ratio(pre, published["presample_hit_rate"]["0.05"])
        rat["meets_presample_target"] = pre >= TARGET_PRESAMPLE_AT_5
        rat["meets_degree_target"] = deg <= TARGET_DEGREE_AT_5
    return res, rat


def summary(results: dict) -> str:
    """One line per preset: statistics against the original and hit rates at a 5% cache."""
    lines = [f"{'preset':<14}{'|V|':>9}{'avg deg (pub)':>16}{'max deg (pub)':>18}"
             f"{'train (pub)':>16}{'presample':>11}{'degree':>8}{'random':>8}{'oracle':>8}"]
    for preset, res in results.items():
        st, pub = res["stats"], res["published"]
        pub_max = pub.get("max_degree", "-")
        pub_train = pub.get("train_fraction", "-")
        lines.append(
            f"{preset:<14}{st['num_nodes']:>9,}"
            f"{st['avg_degree']:>9.1f} ({pub['avg_degree']:g})"
            f"{st['max_degree']:>9,} ({pub_max})"
            f"{st['train_fraction']:>9.4f} ({pub_train})"
            + "".join(f"{res[f'{p}_hit_rate']['0.05']:>{w}.3f}"
                      for p, w in (("presample", 11), ("degree", 8), ("random", 8),
                                   ("oracle", 8))))
    return "\n".join(lines)


def run(quick: bool) -> dict:
    cfg = settings(quick)
    t0 = time.perf_counter()
    results: dict = {}
    ratios: dict = {}
    for preset in PRESETS:
        results[preset], ratios[preset] = preset_report(preset, cfg)
    print("hit rates at a 5% cache; published figures in brackets "
          "(FGNN Fig. 11(b), papers100M: presample 0.96, degree < 0.29, random < 0.05)")
    print(summary(results))
    config = {**cfg, "presets": list(PRESETS), "policies": list(POLICIES),
              "wall_s": round(time.perf_counter() - t0, 1)}
    return {"config": config, "results": {"presets": results}, "ratios": {"presets": ratios}}
