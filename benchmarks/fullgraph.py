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
``cvc_over_oec.<row>`` = t(oec) / t(cvc), ``ring_over_all_to_all.<row>`` = t(depcomm) /
t(depcomm with ``ring``) on the first products row, ``plan_over_100_epochs`` = the largest
hybrid plan time (the cost probe, once per graph, ``probe_s``, included) over 100 of its
epochs, and ``plan_over_100_epochs_without_probe`` the same for the planning alone
(``plan_s``).

The overlap comparison (:func:`run_overlap`; alone: ``python -m benchmarks.fullgraph overlap
[--quick] [--out PATH]``; in the suite under ``results.overlap`` and ``ratios.overlap``): on the
products-like graph, every variant (every deps option on edge-cuts, depcomm on vertex-cuts)
beside its ``strategy.overlap=true`` twin (row key ``<deps>+overlap``) and overlap's computation
with every message awaited at once (``<deps>+split``: the plan's ``hide=False``), the three
trained in one spawn with epochs alternating; ``overlap_over_plain.<row>/<deps>`` = t(plain) /
t(overlap) (>= 1: overlap never slower), ``split_over_plain`` = t(plain) / t(split) (what
computing by source group gains: aggregate-then-update, matrices built once),
``overlap_over_split`` = t(split) / t(overlap) (what hiding the messages gains),
``overlap_worst``, ``overlap_rows_slower`` (how many below 1), the same over the variants that
exchange rows (``overlap_worst_with_exchange``, ``overlap_rows_slower_with_exchange``; depcache's
twins run the same code: ``overlap_same_code_spread`` is the host's noise) and
``overlap_same_loss`` (the twins' last losses and forward bytes agree).
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from benchmarks import ratio
from gnnscale.data.synthetic import generate
from gnnscale.distributed import spawn
from gnnscale.strategies.fullgraph.config import FullGraphConfig

WORLD = 4
EDGE_CUTS = ("metis", "random", "range")
VERTEX_CUTS = ("oec/blocked", "oec/metis", "cvc/blocked", "cvc/metis")
EDGE_DEPS = ("depcache", "depcomm", "hybrid")
OPTIONS = {"depcomm+ring": {"ring": True}}
#: the side graphs also run the greedy's own plan (``deps.margin=0``) beside the guarded hybrid
GREEDY = "hybrid+greedy"


def settings(quick: bool) -> dict:
    if quick:
        return {"graphs": {"products": {"preset": "products_sim", "scale": 0.004},
                           "lowdeg": {"preset": "small", "scale": 0.2, "avg_degree": 4.0},
                           "highdeg": {"preset": "small", "scale": 0.1, "avg_degree": 64.0}},
                "models": ["gcn"], "hiddens": [64], "partitioners": ["metis", "random",
                                                                      "cvc/metis"],
                "side_partitioners": ["metis"], "epochs": 2, "side_epochs": 2, "seed": 0}
    return {"graphs": {"products": {"preset": "products_sim", "scale": 0.1},
                       "lowdeg": {"preset": "small", "scale": 1.0, "avg_degree": 4.0},
                       "highdeg": {"preset": "small", "scale": 0.5, "avg_degree": 100.0}},
            "models": ["gcn", "sage"], "hiddens": [64, 256],
            "partitioners": list(EDGE_CUTS + VERTEX_CUTS), "side_partitioners": ["metis"],
            "epochs": 3, "side_epochs": 31, "seed": 0}


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


#: the main suite's plans: the strategy's defaults (``strategy.overlap``)
DEFAULTS = {"overlap": FullGraphConfig.overlap}
TWINS = {"": {"overlap": False}, "+overlap": {"overlap": True},
         "+split": {"overlap": True, "hide": False},
         "+uncached": {"overlap": False, "cached": False}}


def _build(topo, graph, book, model_name: str, hidden: int, deps: str, hybrid,
           twin: str | None):
    """One variant's model, plan, optimizer and plan figures (``twin``: a key of
    :data:`TWINS`: plain, overlapped, overlap's computation with nothing hidden, or plain with
    the conv's own product, which torch's backward transposes on every call; None: the
    strategy's defaults, :data:`DEFAULTS`)."""
    from gnnscale.deps.depcache import DepCache
    from gnnscale.deps.depcomm import DepComm
    from gnnscale.deps.hybrid import Hybrid
    from gnnscale.strategies.fullgraph.edge_cut import EdgeCutPlan
    from gnnscale.strategies.fullgraph.vertex_cut import VertexCutPlan

    model = _model(model_name, graph, hidden)
    opts = {**OPTIONS.get(deps, {}), **(DEFAULTS if twin is None else TWINS[twin])}
    t0 = time.perf_counter()
    if book.kind == "vertex_cut":
        plan = VertexCutPlan(graph, book, model, topo, **opts)
        extra = {}
    else:
        base = deps.split("+")[0]
        dm = {"depcache": DepCache(), "depcomm": DepComm(), "hybrid": hybrid}[base]
        if deps == "hybrid+greedy":  # the greedy's own plan, whatever the guard predicts
            dm = Hybrid(margin=0.0)
            dm.costs = hybrid.costs
        plan = EdgeCutPlan(graph, book.part, topo.rank, WORLD, dm,
                           model.widths(graph.num_features), **opts)
        extra = {"footprint_bytes": _footprint(plan),
                 "replicated_bytes": plan.layout.report["replicated_bytes"],
                 "layers": plan.layout.report["layers"]}
        if "guard" in plan.layout.report:
            extra["guard"] = plan.layout.report["guard"]
    extra["plan_s"] = time.perf_counter() - t0
    return model, plan, torch.optim.Adam(model.parameters(), lr=0.01), extra


def _rank(topo, graph, books: dict, variants: list[tuple], epochs: int,
          twins: bool = False) -> dict:
    """Per variant (model, hidden, partitioner, deps), and with ``twins`` its twins of
    :data:`TWINS` (deps + "+overlap", "+split", "+uncached"): epoch times and the plan's
    figures. The variants of one row (model, hidden, partitioner: every deps option, and
    their twins) are trained side by side, epochs alternating (the order rotating each
    epoch), so a change in the host's load falls on all of them alike."""
    import torch.distributed as dist
    import torch.nn.functional as F

    from gnnscale.deps.hybrid import Hybrid

    hybrid = Hybrid()  # probed once per rank (collective), reused; timed apart from planning
    probe_s = 0.0
    if any(d.startswith("hybrid") for _, _, _, d in variants):
        t0 = time.perf_counter()
        hybrid.prepare()
        probe_s = time.perf_counter() - t0
    out = {}
    rows: dict = {}
    for v in variants:
        rows.setdefault(v[:3], []).append(v[3])
    for (model_name, hidden, pname), deps_list in rows.items():
        book = books[pname]
        pair = {}
        for deps in deps_list:
            for twin in (TWINS if twins else (None,)):
                model, plan, opt, extra = _build(topo, graph, book, model_name, hidden, deps,
                                                 hybrid, twin)
                if deps.startswith("hybrid"):
                    extra["probe_s"] = probe_s
                mask = graph.mask("train")[plan.masters]
                pair[deps + (twin or "")] = (model, plan, opt, extra, mask,
                                     graph.y[plan.masters[mask]], [])
        names = list(pair)
        for epoch in range(epochs + 1):
            shift = epoch % len(names)
            for name in names[shift:] + names[:shift]:
                model, plan, opt, extra, mask, y, times = pair[name]
                dist.barrier()
                t0 = time.perf_counter()
                opt.zero_grad()
                out_rows = plan.forward(model)
                loss = F.cross_entropy(out_rows[mask], y, reduction="sum") / \
                    graph.train_idx.numel()
                loss.backward()
                for p in model.parameters():
                    dist.all_reduce(p.grad)
                opt.step()
                times.append(time.perf_counter() - t0)
                extra["stats"] = plan.stats()
                extra["loss"] = float(loss.detach())
        for name, built in pair.items():
            extra, times = built[3], built[6]
            stats, loss = extra.pop("stats"), extra.pop("loss")
            out[(model_name, hidden, pname, name)] = {
                "epoch_s": statistics.median(times[1:]), "epoch_s_all": times[1:],
                "last_loss": loss, **stats, **extra}
        del pair
    return out


def _combine(per_rank: list[dict], key, num_edges: int) -> dict:
    rs = [r[key] for r in per_rank]
    slowest = [max(ts) for ts in zip(*(r["epoch_s_all"] for r in rs))]
    row = {"epoch_s": statistics.median(slowest), "epoch_s_all": slowest,
           "plan_s": max(r["plan_s"] for r in rs),
           "last_loss": sum(r["last_loss"] for r in rs)}
    if "probe_s" in rs[0]:
        row["probe_s"] = max(r["probe_s"] for r in rs)
    for k in ("bytes_forward", "bytes_backward", "edges_computed", "vertex_updates",
              "replicated_rows", "cached_feature_bytes", "replicated_bytes"):
        if k in rs[0]:
            row[k] = sum(r[k] for r in rs)
    if "footprint_bytes" in rs[0]:
        row["max_rank_footprint_bytes"] = max(r["footprint_bytes"] for r in rs)
        row["rank0_layers"] = rs[0]["layers"]
    if "guard" in rs[0]:  # the plan the hybrid kept and what the model predicted for each
        row["guard"] = rs[0]["guard"]
    row["redundancy"] = row["edges_computed"] / (num_edges * 2)
    edges = [r["edges_computed"] for r in rs]
    row["edge_skew"] = max(edges) / (sum(edges) / len(edges))
    return row


def measure_rows(graph, parts: list[str], models: list[str], hiddens: list[int], epochs: int,
                 seed: int, options: bool = False, twins: bool = False, greedy: bool = False
                 ) -> tuple[dict, list[tuple]]:
    """Rows ``<model>/h<hidden>/<partitioner>`` -> deps -> figures (4 spawned ranks) and the
    variants run; ``options`` adds NeutronStar's ring on the first row, ``twins`` each
    variant's overlap twin (:func:`_rank`), ``greedy`` the hybrid's greedy plan without the
    guard's margin (:data:`GREEDY`) on edge-cuts."""
    books = {p: _book(graph, p, seed) for p in parts}
    edge_deps = EDGE_DEPS + ((GREEDY,) if greedy else ())
    variants = [(m, h, p, d) for m in models for h in hiddens for p in parts
                for d in (edge_deps if books[p].kind == "edge_cut" else ("depcomm",))]
    if options:  # NeutronStar's ring against plain depcomm
        variants += [(models[0], hiddens[-1], parts[0], d) for d in OPTIONS]
    per_rank = spawn(_rank, WORLD, graph, books, variants, epochs, twins, timeout_s=3000.0,
                     cores="auto")
    rows: dict = {}
    for m, h, p, d in variants:
        for v in ([d + t for t in TWINS] if twins else (d,)):
            rows.setdefault(f"{m}/h{h}/{p}", {})[v] = _combine(per_rank, (m, h, p, v),
                                                               graph.num_edges)
    return rows, variants


def overlap_settings(quick: bool) -> dict:
    """``strategy.overlap`` on and off, alone: the products-like graph, every deps option on
    edge-cuts (metis, random) and depcomm on a vertex-cut (cvc, metis masters)."""
    if quick:
        return {"graphs": {"products": {"preset": "products_sim", "scale": 0.01}},
                "models": ["gcn"], "hiddens": [64],
                "partitioners": ["metis", "random", "cvc/metis"], "side_partitioners": [],
                "epochs": 2, "seed": 0}
    return {"graphs": {"products": {"preset": "products_sim", "scale": 0.03}},
            "models": ["gcn", "sage"], "hiddens": [64, 256],
            "partitioners": ["metis", "random", "cvc/metis"],
            "side_partitioners": [], "epochs": 5, "seed": 0}


def run(quick: bool) -> dict:
    """The suite: the rows of :func:`settings`, then the overlap comparison
    (``results.overlap``, ``ratios.overlap``)."""
    out = run_with(settings(quick))
    ov = run_overlap(quick)
    out["config"]["overlap"], out["results"]["overlap"], out["ratios"]["overlap"] = \
        ov["config"], ov["results"], ov["ratios"]
    return out


def run_overlap(quick: bool) -> dict:
    """Only the overlap comparison (:func:`overlap_settings`): each variant beside its
    overlap twin."""
    return run_with(overlap_settings(quick), twins=True)


def _overlap_ratios(results: dict, ratios: dict) -> None:
    """t(plain) / t(overlap) per row and deps (> 1: overlap faster), split into what the
    computation's split gains (t(plain) / t(split)) and what hiding the messages gains
    (t(split) / t(overlap)); the worst, and whether the twins' losses and bytes agree.

    A variant that moves no rows (depcache) has nothing to overlap: its twins run the same
    code, so their ratios are the noise of the host (``overlap_same_code_spread``), and the
    verdict (``overlap_worst_with_exchange``, ``overlap_rows_slower_with_exchange``) is taken
    over the variants that exchange rows."""
    out, same, moving = {}, True, set()
    ratios["split_over_plain"], ratios["overlap_over_split"] = {}, {}
    ratios["default_over_old_default"], ratios["cached_over_uncached"] = {}, {}
    for row, r in results["rows"].items():
        for d in r:
            if d + "+overlap" in r:
                key, t = f"{row}/{d}", {x: r[d + x]["epoch_s"] for x in TWINS}
                out[key] = ratio(t[""], t["+overlap"])
                ratios["split_over_plain"][key] = ratio(t[""], t["+split"])
                ratios["overlap_over_split"][key] = ratio(t["+split"], t["+overlap"])
                ratios["default_over_old_default"][key] = ratio(t["+uncached"], t["+overlap"])
                ratios["cached_over_uncached"][key] = ratio(t["+uncached"], t[""])
                if r[d]["bytes_forward"] > 0:
                    moving.add(key)
                for x in ("+overlap", "+split", "+uncached"):
                    same &= abs(r[d]["last_loss"] - r[d + x]["last_loss"]) < 1e-3 and \
                        r[d]["bytes_forward"] == r[d + x]["bytes_forward"]
    exchange = [v for k, v in out.items() if k in moving]
    idle = [v for k, v in out.items() if k not in moving]
    ratios["overlap_over_plain"] = out
    ratios["overlap_worst"] = min(out.values()) if out else None
    ratios["overlap_rows_slower"] = sum(v < 1.0 for v in out.values())
    ratios["overlap_worst_with_exchange"] = min(exchange) if exchange else None
    ratios["overlap_rows_slower_with_exchange"] = sum(v < 1.0 for v in exchange)
    ratios["overlap_same_code_spread"] = [min(idle), max(idle)] if idle else None
    ratios["overlap_same_loss"] = same


def run_with(cfg: dict, twins: bool = False) -> dict:
    """The suite on ``cfg`` (:func:`settings`, or :func:`overlap_settings` with ``twins``)."""
    results: dict = {"rows": {}, "graphs": {}}
    ratios: dict = {"ring_over_all_to_all": {},
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
        # the side graphs' epochs are short (0.1-0.7 s): more of them, for a stable median
        epochs = cfg["epochs"] if gname == "products" else cfg.get("side_epochs", cfg["epochs"])
        rows, variants = measure_rows(graph, parts, cfg["models"], cfg["hiddens"], epochs,
                                      cfg["seed"], greedy=gname != "products" and not twins,
                                      options=gname == "products" and not twins, twins=twins)
        for key, row in rows.items():
            results["rows"][f"{gname}/{key}"] = row
        for m, h, p, d in variants:
            if d in OPTIONS:
                row = results["rows"][f"{gname}/{m}/h{h}/{p}"]
                ratios["ring_over_all_to_all"][f"{gname}/{m}/h{h}/{p}"] = ratio(
                    row["depcomm"]["epoch_s"], row[d]["epoch_s"])
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
                        # epoch by epoch (the variants alternate within each epoch round):
                        # the median of the paired ratios, robust to the host's drift
                        best = min(("depcache", "depcomm"), key=t.get)
                        ratios.setdefault("best_over_hybrid_paired", {})[row] = \
                            statistics.median(a / b for a, b in zip(
                                r[best]["epoch_s_all"], r["hybrid"]["epoch_s_all"]))
                        if GREEDY in r:  # the same without the guard's margin
                            ratios.setdefault("best_over_greedy", {})[row] = ratio(
                                min(t["depcache"], t["depcomm"]), r[GREEDY]["epoch_s"])
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
    if twins:
        _overlap_ratios(results, ratios)
    cfg["wall_s"] = time.perf_counter() - t_all
    return {"config": cfg, "results": results, "ratios": ratios}


def run_side(quick: bool) -> dict:
    """Only the side graphs of :func:`settings` (low- and high-degree, METIS): the hybrid
    against both fixed plans where epochs are short."""
    cfg = settings(quick)
    cfg["graphs"] = {k: v for k, v in cfg["graphs"].items() if k != "products"}
    return run_with(cfg)


def run_edge_cuts(quick: bool) -> dict:
    """The hybrid against both fixed plans on the products-like graph at a smaller scale than
    the suite's (x0.03: epochs of 0.2-2 s, so more of them), METIS and random edge-cuts: a
    check of the guard's choices in minutes rather than the suite's half hour."""
    cfg = {"graphs": {"products": {"preset": "products_sim", "scale": 0.004 if quick else 0.03}},
           "models": ["gcn", "sage"], "hiddens": [64] if quick else [64, 256],
           "partitioners": ["metis", "random"], "side_partitioners": [],
           "epochs": 2 if quick else 7, "seed": 0}
    return run_with(cfg)


def run_random(quick: bool) -> dict:
    """The suite's products-like rows on random edge-cuts at the quoted size (x0.1), every
    model and hidden size, with 7 epochs a variant instead of 3 (alternating): the rows where
    the suite's 3-epoch medians put the hybrid and DepComm furthest apart, re-measured."""
    cfg = settings(quick)
    cfg["graphs"] = {"products": cfg["graphs"]["products"]}
    cfg.update(partitioners=["random"], side_partitioners=[], epochs=2 if quick else 7)
    return run_with(cfg)


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.fullgraph overlap|side|edgecuts|random [--quick] [--out
    PATH]``: only the overlap comparison, only the side graphs (:func:`run_side`), only the
    products-like edge-cut rows at x0.03 (:func:`run_edge_cuts`), or only the random
    edge-cut rows at the quoted size with more epochs (:func:`run_random`)."""
    from benchmarks.__main__ import run_part

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["side"]:
        return run_part("fullgraph", "side", run_side, argv, main.__doc__)
    if argv[:1] == ["edgecuts"]:
        return run_part("fullgraph", "edgecuts", run_edge_cuts, argv, main.__doc__)
    if argv[:1] == ["random"]:
        return run_part("fullgraph", "random", run_random, argv, main.__doc__)
    return run_part("fullgraph", "overlap", run_overlap, argv, main.__doc__)


if __name__ == "__main__":
    sys.exit(main())
