"""Benchmark suite ``fullgraph``: DepCache vs DepComm vs the hybrid (NeutronStar) on edge-cuts,
and master/mirror sync on vertex-cuts (DeepGalois), 4 ranks, one full-graph epoch at a time.

Rows: a graph (the products-like synthetic at ``scale``, plus a low-degree and a high-degree
one), a model (GCN, SAGE; 2 layers) and a hidden size, a partitioner (edge-cuts metis, random,
range; vertex-cuts oec and cvc with blocked or metis masters) and every deps option it takes.
Per row: median epoch time (forward, backward, gradient all-reduce, Adam step) of the slowest
rank after a warm-up epoch; bytes sent forward and backward, edges and vertex updates computed
(redundancy = edges over |E| x L), replicated rows, cached feature bytes, the plan's data
(held and received rows, block edges) and plan time, all summed over ranks unless said.
Ratios (speed-ups, > 1 = the first named is slower): ``hybrid_over_depcache.<row>`` =
t(depcache) / t(hybrid), ``hybrid_over_depcomm.<row>``, ``best_over_hybrid.<row>`` =
min(t(depcache), t(depcomm)) / t(hybrid) (>= 0.95: hybrid within 5% of the faster),
``cvc_over_oec.<row>`` = t(oec) / t(cvc), ``ring_over_all_to_all.<row>`` and
``overlap_over_plain.<row>`` = t(depcomm) / t(depcomm with the option) on the first products
row, ``plan_over_100_epochs`` = the largest hybrid plan
time (the cost probe, once per graph, ``probe_s``, included) over 100 of its epochs, and
``plan_over_100_epochs_without_probe`` the same for the planning alone (``plan_s``).
"""

from __future__ import annotations

import statistics
import time

import torch

from benchmarks import ratio
from gnnscale.data.synthetic import generate
from gnnscale.distributed import spawn

WORLD = 4
EDGE_CUTS = ("metis", "random", "range")
VERTEX_CUTS = ("oec/blocked", "oec/metis", "cvc/blocked", "cvc/metis")
EDGE_DEPS = ("depcache", "depcomm", "hybrid")
OPTIONS = {"depcomm+ring": {"ring": True}, "depcomm+overlap": {"overlap": True}}


def settings(quick: bool) -> dict:
    if quick:
        return {"graphs": {"products": {"preset": "products_sim", "scale": 0.004},
                           "lowdeg": {"preset": "small", "scale": 0.2, "avg_degree": 4.0},
                           "highdeg": {"preset": "small", "scale": 0.1, "avg_degree": 64.0}},
                "models": ["gcn"], "hiddens": [64], "partitioners": ["metis", "random",
                                                                      "cvc/metis"],
                "side_partitioners": ["metis"], "epochs": 2, "seed": 0}
    return {"graphs": {"products": {"preset": "products_sim", "scale": 0.1},
                       "lowdeg": {"preset": "small", "scale": 1.0, "avg_degree": 4.0},
                       "highdeg": {"preset": "small", "scale": 0.5, "avg_degree": 100.0}},
            "models": ["gcn", "sage"], "hiddens": [64, 256],
            "partitioners": list(EDGE_CUTS + VERTEX_CUTS), "side_partitioners": ["metis"],
            "epochs": 3, "seed": 0}


def _book(graph, name: str, seed: int):
    from gnnscale.partition import get_partition
    from gnnscale.partition.provider import EDGE_CUTS as ALL_EDGE
    from gnnscale.registry import build, option

    kind, _, masters = name.partition("/")
    kw = {"masters": masters} if masters else {}
    parter = build(option("partitioner", kind, seed=seed, **kw))
    assert kind in ALL_EDGE or masters, name
    return get_partition(graph, parter, WORLD, log=None)


def _model(name: str, graph, hidden: int):
    from gnnscale.registry import build, option

    torch.manual_seed(0)
    kw = {"gcn_norm": "graph"} if name == "gcn" else {}
    model = build(option("model", name, hidden=hidden, num_layers=2, dropout=0.0, **kw),
                  in_channels=graph.num_features, out_channels=graph.num_classes)
    model.bind_graph(graph)
    return model


def _footprint(plan) -> int:
    """Bytes of the rows (held and received, every layer) and block edges of an edge-cut plan."""
    lay = plan.layout
    rows = sum((r.numel() + (lay.recv[k].numel() if k < len(lay.recv) else 0)) * 4 * d
               for k, (r, d) in enumerate(zip(lay.rows, plan.dims)))
    return rows + 16 * sum(s.block.num_edges for s in plan.steps)


def _rank(topo, graph, books: dict, variants: list[tuple], epochs: int) -> dict:
    """Per variant (model, hidden, partitioner, deps): epoch times and the plan's figures."""
    import torch.distributed as dist
    import torch.nn.functional as F

    from gnnscale.deps.depcache import DepCache
    from gnnscale.deps.depcomm import DepComm
    from gnnscale.deps.hybrid import Hybrid
    from gnnscale.strategies.fullgraph.edge_cut import EdgeCutPlan
    from gnnscale.strategies.fullgraph.vertex_cut import VertexCutPlan

    hybrid = Hybrid()  # probed once per rank (collective), reused; timed apart from planning
    probe_s = 0.0
    if any(d.startswith("hybrid") for _, _, _, d in variants):
        t0 = time.perf_counter()
        hybrid.prepare()
        probe_s = time.perf_counter() - t0
    out = {}
    for model_name, hidden, pname, deps in variants:
        model = _model(model_name, graph, hidden)
        book = books[pname]
        t0 = time.perf_counter()
        if book.kind == "vertex_cut":
            plan = VertexCutPlan(graph, book, model, topo)
            extra = {}
        else:
            base = deps.split("+")[0]
            dm = {"depcache": DepCache(), "depcomm": DepComm(), "hybrid": hybrid}[base]
            plan = EdgeCutPlan(graph, book.part, topo.rank, WORLD, dm,
                               model.widths(graph.num_features), **OPTIONS.get(deps, {}))
            extra = {"footprint_bytes": _footprint(plan),
                     **({"probe_s": probe_s} if base == "hybrid" else {}),
                     "replicated_bytes": plan.layout.report["replicated_bytes"],
                     "layers": plan.layout.report["layers"]}
        plan_s = time.perf_counter() - t0
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        mask = graph.mask("train")[plan.masters]
        y = graph.y[plan.masters[mask]]
        times = []
        for _ in range(epochs + 1):
            dist.barrier()
            t0 = time.perf_counter()
            opt.zero_grad()
            out_rows = plan.forward(model)
            loss = F.cross_entropy(out_rows[mask], y, reduction="sum") / graph.train_idx.numel()
            loss.backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
            opt.step()
            times.append(time.perf_counter() - t0)
            stats = plan.stats()
        out[(model_name, hidden, pname, deps)] = {
            "epoch_s": statistics.median(times[1:]), "plan_s": plan_s, **stats, **extra}
    return out


def _combine(per_rank: list[dict], key, num_edges: int) -> dict:
    rs = [r[key] for r in per_rank]
    row = {"epoch_s": max(r["epoch_s"] for r in rs), "plan_s": max(r["plan_s"] for r in rs)}
    if "probe_s" in rs[0]:
        row["probe_s"] = max(r["probe_s"] for r in rs)
    for k in ("bytes_forward", "bytes_backward", "edges_computed", "vertex_updates",
              "replicated_rows", "cached_feature_bytes", "replicated_bytes"):
        if k in rs[0]:
            row[k] = sum(r[k] for r in rs)
    if "footprint_bytes" in rs[0]:
        row["max_rank_footprint_bytes"] = max(r["footprint_bytes"] for r in rs)
        row["rank0_layers"] = rs[0]["layers"]
    row["redundancy"] = row["edges_computed"] / (num_edges * 2)
    edges = [r["edges_computed"] for r in rs]
    row["edge_skew"] = max(edges) / (sum(edges) / len(edges))
    return row


def measure_rows(graph, parts: list[str], models: list[str], hiddens: list[int], epochs: int,
                 seed: int, options: bool = False) -> tuple[dict, list[tuple]]:
    """Rows ``<model>/h<hidden>/<partitioner>`` -> deps -> figures (4 spawned ranks) and the
    variants run; ``options`` adds NeutronStar's ring and overlap on the first row."""
    books = {p: _book(graph, p, seed) for p in parts}
    variants = [(m, h, p, d) for m in models for h in hiddens for p in parts
                for d in (EDGE_DEPS if books[p].kind == "edge_cut" else ("depcomm",))]
    if options:  # NeutronStar's ring and overlap, each against plain depcomm
        variants += [(models[0], hiddens[-1], parts[0], d) for d in OPTIONS]
    per_rank = spawn(_rank, WORLD, graph, books, variants, epochs, timeout_s=3000.0)
    rows: dict = {}
    for m, h, p, d in variants:
        rows.setdefault(f"{m}/h{h}/{p}", {})[d] = _combine(per_rank, (m, h, p, d),
                                                           graph.num_edges)
    return rows, variants


def run(quick: bool) -> dict:
    cfg = settings(quick)
    results: dict = {"rows": {}, "graphs": {}}
    ratios: dict = {"ring_over_all_to_all": {}, "overlap_over_plain": {},
                    "best_over_hybrid": {}, "hybrid_over_depcache": {},
                    "hybrid_over_depcomm": {}, "cvc_over_oec": {}, "plan_over_100_epochs": None,
                    "plan_over_100_epochs_without_probe": None}
    worst_plan = worst_planner = 0.0
    t_all = time.perf_counter()
    for gname, gspec in cfg["graphs"].items():
        spec = dict(gspec)
        graph = generate(spec.pop("preset"), scale=spec.pop("scale"), seed=cfg["seed"], **spec)
        results["graphs"][gname] = {"nodes": graph.num_nodes, "edges": graph.num_edges,
                                    "features": graph.num_features}
        parts = cfg["partitioners"] if gname == "products" else cfg["side_partitioners"]
        rows, variants = measure_rows(graph, parts, cfg["models"], cfg["hiddens"],
                                      cfg["epochs"], cfg["seed"], options=gname == "products")
        for key, row in rows.items():
            results["rows"][f"{gname}/{key}"] = row
        for m, h, p, d in variants:
            if d in OPTIONS:
                row = results["rows"][f"{gname}/{m}/h{h}/{p}"]
                key = "ring_over_all_to_all" if "ring" in d else "overlap_over_plain"
                ratios[key][f"{gname}/{m}/h{h}/{p}"] = ratio(row["depcomm"]["epoch_s"],
                                                              row[d]["epoch_s"])
        for m in cfg["models"]:
            for h in cfg["hiddens"]:
                for p in parts:
                    row = f"{gname}/{m}/h{h}/{p}"
                    r = results["rows"][row]
                    if "hybrid" in r:
                        t = {d: r[d]["epoch_s"] for d in EDGE_DEPS}
                        ratios["hybrid_over_depcache"][row] = ratio(t["depcache"], t["hybrid"])
                        ratios["hybrid_over_depcomm"][row] = ratio(t["depcomm"], t["hybrid"])
                        ratios["best_over_hybrid"][row] = ratio(
                            min(t["depcache"], t["depcomm"]), t["hybrid"])
                        plan_s, probe_s = r["hybrid"]["plan_s"], r["hybrid"]["probe_s"]
                        worst_plan = max(worst_plan, (plan_s + probe_s) / (100 * t["hybrid"]))
                        worst_planner = max(worst_planner, plan_s / (100 * t["hybrid"]))
                for masters in ("blocked", "metis"):
                    oec = results["rows"].get(f"{gname}/{m}/h{h}/oec/{masters}")
                    cvc = results["rows"].get(f"{gname}/{m}/h{h}/cvc/{masters}")
                    if oec and cvc:
                        ratios["cvc_over_oec"][f"{gname}/{m}/h{h}/{masters}"] = ratio(
                            oec["depcomm"]["epoch_s"], cvc["depcomm"]["epoch_s"])
    ratios["plan_over_100_epochs"] = worst_plan
    ratios["plan_over_100_epochs_without_probe"] = worst_planner
    cfg["wall_s"] = time.perf_counter() - t_all
    return {"config": cfg, "results": results, "ratios": ratios}
