"""Suite ``cache``: hit rates of the cache policies and host traffic of the two placements.

Hit rates (GNNLab Fig. 10/11): for each graph, policy and cache ratio, a :class:`FeatureStore`
serves the input nodes of every batch of ``measured_epochs`` real sampled epochs (training seed
stream); the hit rate is its accounted ``hits / requested`` over those epochs. ``presample``
pre-samples K epochs on its own seed stream (never the measured draws); ``oracle`` caches the
most visited vertices of exactly the measured batches (the upper bound). The stores gather from
a one-column table holding each vertex's id, so every gathered row is also checked.

Graphs: ``products`` (products-like synthetic: skewed degrees, communities, random 8-10%
training set) and ``lowdeg_train`` (the same generator; training set = whole communities with
the lowest mean degree, so high-degree vertices elsewhere are rarely sampled: degree misleads).

Placement (GSplit Table 1, PaGraph vs Quiver): data parallelism on 4 simulated ranks, each step
splitting the global batch into 4 micro-batches that each rank samples itself; every rank's
store gathers its micro-batch's input features (real rows). ``replicated``: each rank caches
the same hottest ``placement_ratio`` of vertices; ``partitioned``: each caches the hottest
``placement_ratio`` of its METIS part and fetches peers' rows (``LocalExchange``): equal total
cache memory. Figures are bytes per epoch summed over ranks.
"""

from __future__ import annotations

import time

import torch

from benchmarks import ratio
from gnnscale.cache.degree import DegreePolicy
from gnnscale.cache.exchange import LocalExchange
from gnnscale.cache.oracle import OraclePolicy
from gnnscale.cache.presample import PresamplePolicy
from gnnscale.cache.random import RandomPolicy
from gnnscale.cache.store import FeatureStore, owner_map, select_cached
from gnnscale.data.graph import GraphStore
from gnnscale.data.synthetic import communities, generate
from gnnscale.sampling.schedule import Schedule

RATIOS = (0.01, 0.05, 0.10, 0.25)
POLICIES = ("degree", "presample", "random", "oracle")
WORLD = 4


def settings(quick: bool) -> dict:
    """Graphs as ``(preset, scale, batch_size)``; batches keep products' seeds-per-vertex share
    (1024 of 2.45M, about 0.04%), else one batch's 3-hop sample covers a small graph."""
    if quick:
        return {"graphs": {"products": ("products_sim", 0.01, 16),
                           "lowdeg_train": ("small", 0.4, 16)},
                "fanouts": [15, 10, 5], "presample_epochs": 1, "measured_epochs": 2,
                "placement_ratio": 0.05, "seed": 0}
    return {"graphs": {"products": ("products_sim", 0.05, 64),
                       "lowdeg_train": ("small", 1.0, 32)},
            "fanouts": [15, 10, 5], "presample_epochs": 1, "measured_epochs": 3,
            "placement_ratio": 0.05, "seed": 0}


def lowdeg_train(graph: GraphStore, comm: torch.Tensor, fraction: float = 0.1) -> torch.Tensor:
    """Every vertex of the lowest-mean-degree communities, about ``fraction`` of all vertices."""
    deg = graph.in_degree().double()
    k = int(comm.max()) + 1
    size = torch.bincount(comm, minlength=k).double()
    mean = torch.bincount(comm, weights=deg, minlength=k) / size.clamp(min=1)
    order = torch.argsort(mean, stable=True)
    take = order[: int(torch.searchsorted(torch.cumsum(size[order], 0),
                                          fraction * graph.num_nodes)) + 1]
    chosen = torch.zeros(k, dtype=torch.bool)
    chosen[take] = True
    return chosen[comm].nonzero().flatten()


def make_graphs(cfg: dict) -> dict[str, GraphStore]:
    preset, scale, _ = cfg["graphs"]["products"]
    products = generate(preset, scale=scale, seed=cfg["seed"])
    preset, scale, _ = cfg["graphs"]["lowdeg_train"]
    low = generate(preset, scale=scale, seed=cfg["seed"] + 1)
    comm = torch.from_numpy(communities(preset, scale=scale, seed=cfg["seed"] + 1))
    low.train_idx = lowdeg_train(low, comm)
    low.name = "lowdeg_train"
    return {"products": products, "lowdeg_train": low}


def measured_epochs(graph, sampler, cfg, batch_size: int) -> list[torch.Tensor]:
    """Per measured epoch (training seed stream), the input nodes of its batches, concatenated.

    A store accounts per requested position, so one gather of an epoch's concatenated input
    nodes gives exactly the counters of one gather per batch, at a fraction of the call cost.
    """
    out = []
    for epoch in range(cfg["measured_epochs"]):
        schedule = Schedule(graph.train_idx, batch_size=batch_size, seed=cfg["seed"])
        out.append(torch.cat([sampler.sample(graph, d.seeds, seed=d.sample_seed).input_nodes
                              for d in schedule.draws(epoch)]))
    return out


def policy(name: str, r: float, visits: torch.Tensor, cfg: dict):
    if name == "degree":
        return DegreePolicy(ratio=r)
    if name == "presample":
        return PresamplePolicy(ratio=r, epochs=cfg["presample_epochs"])
    if name == "random":
        return RandomPolicy(ratio=r)
    return OraclePolicy(ratio=r, visits=visits)


def hit_rates(graph: GraphStore, sampler, cfg: dict, batch_size: int) -> dict:
    """results.<graph>.<policy>.<ratio> = hit rate and host MB per epoch (real row size)."""
    batches = measured_epochs(graph, sampler, cfg, batch_size)
    visits = torch.bincount(torch.cat(batches), minlength=graph.num_nodes).double()
    id_table = torch.arange(graph.num_nodes, dtype=torch.float64).unsqueeze(1)
    row_bytes = graph.num_features * graph.x.element_size()
    kw = dict(schedule=Schedule(graph.train_idx, batch_size=batch_size, seed=cfg["seed"]),
              sampler=sampler, seed=cfg["seed"])
    out: dict = {}
    for name in POLICIES:
        heat = policy(name, 0.0, visits, cfg).hotness(graph, visits=visits, **kw)
        out[name] = {}
        for r in RATIOS:
            cap = policy(name, r, visits, cfg).capacity(graph.num_nodes, row_bytes)
            store = FeatureStore(id_table, select_cached(heat, cap))
            for ids in batches:
                if not torch.equal(store.gather(ids).squeeze(1).long(), ids):
                    raise AssertionError("feature store returned wrong rows")
            st = store.epoch_stats()
            out[name][f"{r:g}"] = {
                "hit_rate": st["cache_hit_rate"],
                "host_mb_per_epoch": st["misses"] * row_bytes / cfg["measured_epochs"] / 2**20,
            }
    return out


def placement(graph: GraphStore, sampler, cfg: dict, batch_size: int) -> dict:
    """Host and rank-to-rank bytes per epoch over 4 data-parallel ranks, per placement."""
    from gnnscale.partition import get_partition
    from gnnscale.partition.metis import MetisPartitioner

    part = get_partition(graph, MetisPartitioner(seed=cfg["seed"]), WORLD, log=None).part
    n = graph.num_nodes
    pol = PresamplePolicy(ratio=cfg["placement_ratio"], epochs=cfg["presample_epochs"])
    schedule = Schedule(graph.train_idx, batch_size=batch_size, seed=cfg["seed"])
    heat = pol.hotness(graph, schedule=schedule, sampler=sampler)
    cap = pol.capacity(n, graph.num_features * graph.x.element_size())
    topos = [type("SimRank", (), {"rank": r, "world_size": WORLD})() for r in range(WORLD)]
    rep = [FeatureStore(graph.x, select_cached(heat, cap), topo=topos[r]) for r in range(WORLD)]
    sets = [select_cached(heat, cap, placement="partitioned", part=part, rank=r)
            for r in range(WORLD)]
    owner = owner_map(sets, n)
    parted: list[FeatureStore] = []
    exchange = LocalExchange(parted)
    parted += [FeatureStore(graph.x, sets[r], topo=topos[r], owner=owner, exchange=exchange)
               for r in range(WORLD)]
    none = [FeatureStore(graph.x, torch.empty(0, dtype=torch.long), topo=topos[r])
            for r in range(WORLD)]
    for epoch in range(cfg["measured_epochs"]):
        inputs: list[list[torch.Tensor]] = [[] for _ in range(WORLD)]
        for d in schedule.replace(slots=WORLD).draws(epoch):
            inputs[d.slot].append(sampler.sample(graph, d.seeds, seed=d.sample_seed).input_nodes)
        for r in range(WORLD):  # one call per rank and epoch: same counters as per step
            ids = torch.cat(inputs[r])
            rows = [stores[r].gather(ids) for stores in (rep, parted, none)]
            if not (torch.equal(rows[0], rows[2]) and torch.equal(rows[1], rows[2])):
                raise AssertionError("placements returned different rows")
    res = {}
    for name, stores in (("replicated", rep), ("partitioned", parted), ("none", none)):
        tot = {k: sum(s.epoch_stats()[k] for s in stores) for k in
               ("bytes_host_to_rank", "bytes_rank_to_rank", "hits", "requested")}
        e = cfg["measured_epochs"]
        res[name] = {"bytes_host_to_rank": tot["bytes_host_to_rank"] / e,
                     "bytes_rank_to_rank": tot["bytes_rank_to_rank"] / e,
                     "cache_hit_rate": tot["hits"] / max(1, tot["requested"]),
                     "cache_vertices_total": sum(s.num_cached for s in stores)}
    return res


def run(quick: bool) -> dict:
    from gnnscale.sampling.neighbor import NeighborSampler

    cfg = settings(quick)
    t0 = time.perf_counter()
    graphs = make_graphs(cfg)
    sampler = NeighborSampler(cfg["fanouts"])
    results: dict = {}
    ratios: dict = {}
    for gname, graph in graphs.items():
        results[gname] = hit_rates(graph, sampler, cfg, cfg["graphs"][gname][2])
        res = results[gname]
        ratios[gname] = {
            "presample_vs_oracle": {k: ratio(res["presample"][k]["hit_rate"],
                                             res["oracle"][k]["hit_rate"])
                                    for k in res["oracle"]},
            "presample_vs_degree": {k: ratio(res["presample"][k]["hit_rate"],
                                             res["degree"][k]["hit_rate"])
                                    for k in res["oracle"]},
        }
    results["placement"] = placement(graphs["products"], sampler, cfg,
                                     cfg["graphs"]["products"][2])
    pl = results["placement"]
    ratios["placement"] = {"replicated_over_partitioned": ratio(
        pl["replicated"]["bytes_host_to_rank"], pl["partitioned"]["bytes_host_to_rank"])}
    config = {**cfg, "ratios": list(RATIOS), "policies": list(POLICIES), "world": WORLD,
              "graphs": {g: graphs[g].summary() for g in graphs},
              "wall_s": round(time.perf_counter() - t0, 1)}
    return {"config": config, "results": results, "ratios": ratios}
