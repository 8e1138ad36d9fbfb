"""Benchmark suite ``offload``: HongTu's offloaded full-graph training on the products-like
synthetic, 4 ranks (sections 4-5, Tables 3, 8, 9).

Five parts:

- **Volumes from the plans** (no training; :func:`offload_volumes`, also used by the
  ``reproduce`` suite): every rank's transfer plan of one layer pass, for chunks 1, 8, 32 per
  part, reorganisation off/on, each dedup level, first level metis and random. Per row:
  host-to-device rows (and bytes at the feature width), rows reused on the device, rows shared
  rank to rank, alpha (loaded rows of ``dedup=none`` over |V|, Table 3) and planning time.
  Table 8 layout per (first level, chunks, reorganisation): baseline alpha|V| rows, the inter
  and intra savings over |V| and their shares of the baseline.
- **Memory per doubling of chunks** (section 4.3): the planned device bound of
  :class:`~gnnscale.strategies.offload.strategy.Offload` (the largest over ranks) and the largest
  subgraph's rows (HongTu's alpha|V|/N) for chunks 1..32, and the reduction per doubling.
- **Measured epochs** on real gloo ranks: offload at 1/8/32 chunks (inter+intra, reorganised)
  and ``fullgraph`` with depcomm on the same metis book; median epoch time of the slowest rank
  after a warm-up epoch, peak device bytes against the planned bound (max over ranks),
  recompute time, planning time over 100 epochs (Table 9: <= 1.5%).
- **The intermediate-data rule** (section 4.2, costed as Eq. 4; :func:`run_rule`, alone:
  ``python -m benchmarks.offload rule [--quick] [--out PATH]``): on the ``products_like``
  preset, ``intermediate=auto`` (the rule's per-batch choice from measured costs) against
  ``recompute`` and ``cache`` throughout, the three trained side by side in one spawn, epochs
  alternating (the order rotating each round); per variant the median epoch time of the
  slowest rank, host-to-device, device-to-host and rank-to-rank bytes per epoch (summed over
  ranks), the measured peak device bytes against the planned bound (largest rank), the loss
  per epoch (equal: every choice gives the same gradients), and the rule's choice per layer
  with its modelled seconds. Ratios ``rule.<row>.rule_over_best`` = t(auto) / min(t(cache),
  t(recompute)) (target <= 1 within noise), ``rule_over_cache``, ``rule_over_recompute``.

- **The cached transpose** (:func:`run_transpose`, alone only: ``python -m benchmarks.offload
  transpose [--quick] [--out PATH]``): each chunk's matrix and transpose built once (the
  default) against the model's own product per call, whose backward re-transposes
  (``Offload.cached_products = False``), on 2 ranks, epochs alternating; per row the median
  epoch of the slowest rank, the recompute seconds, the losses (``losses_bit_identical``) and
  ``cached_over_per_call``.

Ratios: ``dedup_saving.<first_level>.<chunks>`` = 1 - h2d(inter+intra) / h2d(none) without
reorganisation, ``dedup_saving_reorganized`` the same with it, ``reorganize_gain`` = the
difference, ``intra_share_of_saving`` (HongTu: 36-84%), ``memory_per_doubling.<first_level>``
= mean 1 - bound(2c) / bound(c) (HongTu: 32-47%; ``level2_metis.memory_per_doubling`` the
same with METIS chunks, ``results.bounds_level2_metis`` their bounds),
``offload_over_depcomm.<chunks>`` =
t(offload) / t(depcomm), ``plan_over_100_epochs.<chunks>``, ``peak_within_bound`` (every row).
"""

from __future__ import annotations

import contextlib
import io
import statistics
import sys
import time

import torch

from benchmarks import ratio
from gnnscale.data.graph import GraphStore
from gnnscale.data.synthetic import generate
from gnnscale.distributed import spawn
from gnnscale.strategies.offload.chunks import Chunking, two_level
from gnnscale.strategies.offload.transfers import DEDUP, plan_transfers

WORLD = 4
FIRST_LEVELS = ("metis", "random")
CHUNKS = (1, 8, 32)
BOUND_CHUNKS = (1, 2, 4, 8, 16, 32)
FLOAT = 4


def settings(quick: bool) -> dict:
    base = {"preset": "products_sim", "model": "gcn", "layers": 2, "seed": 0,
            "measured_chunks": list(CHUNKS), "measured_first_level": "metis"}
    if quick:
        return {**base, "scale": 0.01, "hidden": 64, "epochs": 2}
    return {**base, "scale": 0.1, "hidden": 64, "epochs": 3}


# -- volumes from the plans ----------------------------------------------------------------------
def offload_volumes(graph: GraphStore, part: torch.Tensor, world: int, chunks: int,
                    reorganize: bool, dedup: str, chunking: Chunking | None = None,
                    chunk_s: float | None = None) -> dict:
    """Host-to-device volumes of one layer pass, summed over the ``world`` ranks' plans.

    ``chunking`` (with the seconds it took, ``chunk_s``) reuses a :func:`two_level` result
    of the same arguments. ``plan_s`` is what one rank spends planning: the chunking plus the
    slowest rank's transfer plan (ranks plan in parallel). Bytes are at the feature width.
    """
    if chunking is None:
        t0 = time.perf_counter()
        chunking = two_level(graph, part, world, chunks, reorganize)
        chunk_s = time.perf_counter() - t0
    masters = [(part == p).nonzero().flatten() for p in range(world)]
    loaded = reused = shared = 0
    slowest = 0.0
    for rank in range(world):
        t0 = time.perf_counter()
        plan = plan_transfers(chunking, part, masters, rank, dedup, graph)
        slowest = max(slowest, time.perf_counter() - t0)
        loaded += sum(t.rows_loaded for t in plan)
        reused += sum(t.rows_reused for t in plan)
        shared += sum(int(t.send_idx.numel()) for t in plan)
    n = graph.num_nodes
    return {"chunks": chunks, "reorganize": reorganize, "dedup": dedup,
            "h2d_rows": loaded, "h2d_bytes": loaded * graph.num_features * FLOAT,
            "h2d_rows_per_v": loaded / n, "reused_rows": reused, "shared_rows": shared,
            "alpha": chunking.replication(n), "plan_s": (chunk_s or 0.0) + slowest}


def table8(graph: GraphStore, part: torch.Tensor, world: int, chunks: int,
           reorganize: bool, level2: str = "range") -> dict:
    """Every dedup level of one chunking and HongTu's Table 8 figures (normalised to |V|)."""
    t0 = time.perf_counter()
    chunking = two_level(graph, part, world, chunks, reorganize, level2)
    chunk_s = time.perf_counter() - t0
    levels = {d: offload_volumes(graph, part, world, chunks, reorganize, d, chunking, chunk_s)
              for d in DEDUP}
    n = graph.num_nodes
    none, inter, both = (levels[d]["h2d_rows"] for d in DEDUP)
    saved = none - both
    return {"levels": levels, "alpha": levels["none"]["alpha"],
            "baseline_per_v": none / n,
            "inter_saving_per_v": (none - inter) / n, "intra_saving_per_v": (inter - both) / n,
            "inter_share": (none - inter) / none, "intra_share": (inter - both) / none,
            "saving": saved / none, "intra_of_saving": (inter - both) / saved if saved else 0.0,
            "chunk_s": chunk_s}


def _book(graph: GraphStore, name: str, seed: int):
    from gnnscale.partition import get_partition
    from gnnscale.registry import build, option

    return get_partition(graph, build(option("partitioner", name, seed=seed)), WORLD, log=None)


# -- strategies in one process (bounds) and on gloo ranks (epochs) -------------------------------
def _context(topo, graph: GraphStore, book, cfg: dict):
    from gnnscale.cache.none import NoCache
    from gnnscale.deps.depcomm import DepComm
    from gnnscale.optim.adam import Adam
    from gnnscale.partition.provider import FixedPartition
    from gnnscale.registry import build, option
    from gnnscale.strategies.base import RunContext

    torch.manual_seed(cfg["seed"])
    kw = {"gcn_norm": "graph"} if cfg["model"] == "gcn" else {}
    model = build(option("model", cfg["model"], hidden=cfg["hidden"],
                         num_layers=cfg["layers"], dropout=0.0, **kw),
                  in_channels=graph.num_features, out_channels=graph.num_classes)
    return RunContext(topo=topo, graph=graph, model=model, sampler=None, cache_policy=NoCache(),
                      deps=DepComm(), partition=FixedPartition(book), optim=Adam(lr=0.01),
                      seed=cfg["seed"])


def _offload(topo, graph: GraphStore, book, cfg: dict, chunks: int, **opts):
    from gnnscale.strategies.offload.strategy import Offload

    strat = Offload(_context(topo, graph, book, cfg), chunks=chunks, **opts)
    with contextlib.redirect_stdout(io.StringIO()):  # rank 0 prints its plan
        strat.setup()
    return strat


def device_bounds(graph: GraphStore, book, cfg: dict, chunk_counts=BOUND_CHUNKS,
                  level2: str = "range") -> dict:
    """Per chunk count: the planned device bound (the largest over ranks, each rank's plan
    built in this process), alpha and the largest subgraph's rows (HongTu 4.3: a subgraph
    holds alpha|V|/N rows, N = ranks x chunks), with ``level2`` chunks."""
    from gnnscale.distributed.topology import Topology

    out = {}
    for chunks in chunk_counts:
        bounds = []
        for rank in range(WORLD):
            topo = Topology(rank=rank, world_size=WORLD, local_rank=rank,
                            local_world_size=WORLD, device=torch.device("cpu"))
            strat = _offload(topo, graph, book, cfg, chunks, dedup="inter+intra",
                             reorganize=False, level2=level2)
            bounds.append(strat.bound)
            rows = max(x.numel() for p in strat.chunking.load for x in p)
            alpha = strat.chunking.replication(graph.num_nodes)
            del strat
        out[chunks] = {"chunks": chunks, "bound_bytes": max(bounds), "largest_subgraph_rows": rows,
                       "alpha": alpha,
                       "largest_subgraph_bytes": rows * graph.num_features * FLOAT}
    return out


def _rank(topo, graph: GraphStore, book, cfg: dict) -> dict:
    """Per row: epoch times and the strategy's figures on this rank."""
    import torch.distributed as dist

    from gnnscale.strategies.fullgraph.strategy import FullGraph

    rows = {}
    variants = [("depcomm", None)] + [(f"offload/{c}", c) for c in cfg["measured_chunks"]]
    for name, chunks in variants:
        if chunks is None:
            strat = FullGraph(_context(topo, graph, book, cfg))
            with contextlib.redirect_stdout(io.StringIO()):
                strat.setup()
        else:
            strat = _offload(topo, graph, book, cfg, chunks, dedup="inter+intra",
                             reorganize=True, intermediate="auto")
        times, metrics = [], []
        for epoch in range(cfg["epochs"] + 1):
            dist.barrier()
            m = strat.train_epoch(epoch)
            times.append(m["epoch_time"])
            metrics.append(m)
        last = metrics[-1]
        rows[name] = {"epoch_s": statistics.median(times[1:]), "plan_s": strat.plan_time,
                      "train_loss": last["train_loss"]}
        for k in ("peak_device_bytes", "device_bound_bytes", "recompute_time",
                  "bytes_host_to_device", "bytes_rank_to_rank", "bytes_reused",
                  "rows_host_loaded", "replication_alpha"):
            if k in last:
                rows[name][k] = last[k]
        del strat
    return rows


def _combine(per_rank: list[dict], name: str) -> dict:
    rs = [r[name] for r in per_rank]
    row = {"epoch_s": max(r["epoch_s"] for r in rs), "plan_s": max(r["plan_s"] for r in rs),
           "train_loss": rs[0]["train_loss"]}
    if "peak_device_bytes" in rs[0]:
        row["peak_device_bytes"] = max(r["peak_device_bytes"] for r in rs)
        row["device_bound_bytes"] = max(r["device_bound_bytes"] for r in rs)
        row["peak_within_bound"] = all(r["peak_device_bytes"] <= r["device_bound_bytes"]
                                       for r in rs)
        row["recompute_s"] = max(r["recompute_time"] for r in rs)
        for k in ("bytes_host_to_device", "bytes_rank_to_rank", "bytes_reused",
                  "rows_host_loaded"):
            row[k] = sum(r[k] for r in rs)
        row["alpha"] = rs[0]["replication_alpha"]
    return row


@contextlib.contextmanager
def _threads(n: int):
    """Plan in this process with the threads a rank gets (spawn: cores // ranks, here 1):
    index work on a shared 2-core host slows down many-fold with more threads than cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _volumes(graph: GraphStore, part: torch.Tensor, first: str, results: dict,
             ratios: dict) -> None:
    """Table 8 rows of one first level, every chunk count, without and with reorganisation."""
    for chunks in CHUNKS:
        c = str(chunks)
        for reorg in (False, True):
            t8 = table8(graph, part, WORLD, chunks, reorg)
            tag = "reorganized" if reorg else "plain"
            results["volumes"].setdefault(first, {}).setdefault(c, {})[tag] = t8.pop("levels")
            results["table8"].setdefault(first, {}).setdefault(c, {})[tag] = t8
            key = "dedup_saving_reorganized" if reorg else "dedup_saving"
            ratios[key].setdefault(first, {})[c] = t8["saving"]
        ratios["intra_share_of_saving"].setdefault(first, {})[c] = \
            results["table8"][first][c]["reorganized"]["intra_of_saving"]
        ratios["reorganize_gain"].setdefault(first, {})[c] = \
            ratios["dedup_saving_reorganized"][first][c] - ratios["dedup_saving"][first][c]
        # Table 3 counts partitions in all: WORLD parts x chunks
        results["alpha"].setdefault(first, {})[str(WORLD * chunks)] = \
            results["table8"][first][c]["plain"]["alpha"]


# -- the suite -----------------------------------------------------------------------------------
def per_doubling(bounds: dict, first: str, ratios: dict) -> None:
    """HongTu 4.3's memory drop per doubling of chunks, from :func:`device_bounds`."""
    for key, per in (("memory_per_doubling", lambda b: b["bound_bytes"]),
                     ("subgraph_rows_per_doubling", lambda b: b["largest_subgraph_rows"]),
                     # HongTu 4.3: a subgraph's vertex data alpha|V|/N, N = ranks x chunks
                     ("vertex_data_per_doubling", lambda b: b["alpha"] / b["chunks"])):
        counts = sorted(bounds)
        steps = [1 - per(bounds[b]) / per(bounds[a]) for a, b in zip(counts[:-1], counts[1:])]
        ratios.setdefault(key, {})[first] = {"per_step": steps, "mean": statistics.mean(steps)}


def run(quick: bool) -> dict:
    cfg = settings(quick)
    t_all = time.perf_counter()
    graph = generate(cfg["preset"], scale=cfg["scale"], seed=cfg["seed"])
    results: dict = {"graph": {"nodes": graph.num_nodes, "edges": graph.num_edges,
                               "features": graph.num_features},
                     "volumes": {}, "table8": {}, "alpha": {}, "bounds": {}, "epochs": {}}
    ratios: dict = {"dedup_saving": {}, "dedup_saving_reorganized": {}, "reorganize_gain": {},
                    "intra_share_of_saving": {}, "memory_per_doubling": {},
                    "subgraph_rows_per_doubling": {}, "vertex_data_per_doubling": {},
                    "offload_over_depcomm": {},
                    "plan_over_100_epochs": {}}
    books = {}
    with _threads(1):
        for first in FIRST_LEVELS:
            t0 = time.perf_counter()
            books[first] = _book(graph, first, cfg["seed"])
            results.setdefault("first_level_s", {})[first] = time.perf_counter() - t0
            _volumes(graph, books[first].part, first, results, ratios)
        first = cfg["measured_first_level"]
        bounds = device_bounds(graph, books[first], cfg)
        metis_bounds = device_bounds(graph, books[first], cfg, level2="metis")
    results["bounds"][first] = {str(c): b for c, b in bounds.items()}
    results["bounds_level2_metis"] = {first: {str(c): b for c, b in metis_bounds.items()}}
    per_doubling(bounds, first, ratios)
    ratios["level2_metis"] = {}
    per_doubling(metis_bounds, first, ratios["level2_metis"])
    per_rank = spawn(_rank, WORLD, graph, books[first], cfg, timeout_s=3000.0,
                     cores="auto")
    names = ["depcomm"] + [f"offload/{c}" for c in cfg["measured_chunks"]]
    epochs = {n: _combine(per_rank, n) for n in names}
    results["epochs"] = {f"{first}/{n}": r for n, r in epochs.items()}
    base = epochs["depcomm"]["epoch_s"]
    for c in cfg["measured_chunks"]:
        row = epochs[f"offload/{c}"]
        ratios["offload_over_depcomm"][str(c)] = ratio(row["epoch_s"], base)
        ratios["plan_over_100_epochs"][str(c)] = row["plan_s"] / (100 * row["epoch_s"])
    ratios["peak_within_bound"] = all(epochs[f"offload/{c}"]["peak_within_bound"]
                                      for c in cfg["measured_chunks"])
    rule = run_rule(quick)
    cfg["rule"], results["rule"], ratios["rule"] = rule["config"], rule["results"], \
        rule["ratios"]
    cfg["wall_s"] = time.perf_counter() - t_all
    return {"config": cfg, "results": results, "ratios": ratios}


# -- the intermediate-data rule: auto against recompute and cache throughout ---------------------
RULE_VARIANTS = ("auto", "recompute", "cache")


def rule_settings(quick: bool) -> dict:
    """The rule's rows: ``products_like`` (the brief's graph: range chunks, degree 50) and the
    low-degree ``web_like`` (METIS chunks: few rows to reload, cheap aggregation)."""
    base = {"world": 4, "first_level": "metis", "seed": 0, "dedup": "inter+intra",
            "reorganize": True}
    if quick:
        return {**base, "epochs": 3, "graphs": {
            "products_like": {"preset": "products_like", "scale": 0.25, "chunks": 4,
                              "level2": "range",
                              "rows": [{"model": "gcn", "layers": 2, "hidden": 64}]}}}
    return {**base, "epochs": 5, "graphs": {
        "products_like": {"preset": "products_like", "scale": 1.0, "chunks": 8,
                          "level2": "range",
                          "rows": [{"model": "gcn", "layers": 3, "hidden": 128},
                                   {"model": "sage", "layers": 3, "hidden": 128}]},
        "web_like": {"preset": "web_like", "scale": 0.5, "chunks": 8, "level2": "metis",
                     "rows": [{"model": "gcn", "layers": 2, "hidden": 128}]}}}


def _alternate(strats: dict, epochs: int) -> tuple[dict, dict, dict]:
    """Train every variant's strategy ``epochs + 1`` epochs, alternating epoch by epoch with
    the order rotating; epoch 0 is a warm-up. Returns each variant's epoch times (after the
    warm-up), every epoch's loss and its last epoch's metrics."""
    import torch.distributed as dist

    names = list(strats)
    times: dict = {v: [] for v in names}
    losses: dict = {v: [] for v in names}
    last: dict = {}
    for epoch in range(epochs + 1):
        shift = epoch % len(names)
        for v in names[shift:] + names[:shift]:
            dist.barrier()
            with contextlib.redirect_stdout(io.StringIO()):  # the strategy's reports
                m = strats[v].train_epoch(epoch)
            losses[v].append(m["train_loss"])
            if epoch:
                times[v].append(m["epoch_time"])
            last[v] = m
    return times, losses, last


def _rule_rank(topo, graph: GraphStore, book, cfg: dict) -> dict:
    """Per row and variant: every epoch's time and the last epoch's figures on this rank."""

    out = {}
    for row in cfg["rows"]:
        name = f"{row['model']}/l{row['layers']}/h{row['hidden']}"
        model_cfg = {**cfg, **row}
        strats = {v: _offload(topo, graph, book, model_cfg, cfg["chunks"], dedup=cfg["dedup"],
                              reorganize=cfg["reorganize"], intermediate=v,
                              level2=cfg["level2"])
                  for v in RULE_VARIANTS}
        times, losses, last = _alternate(strats, cfg["epochs"])  # epoch 0: auto decides
        out[name] = {v: {"epoch_s": times[v], "losses": losses[v],
                         **{k: last[v][k] for k in (
                             "bytes_host_to_device", "bytes_device_to_host",
                             "bytes_rank_to_rank", "bytes_reused", "peak_device_bytes",
                             "device_bound_bytes", "recompute_time", "rows_host_loaded",
                             "edges_computed")},
                         "modes": ["".join("c" if x == "cache" else "r" for x in ms)
                                   for ms in strats[v].modes],
                         "rule": {str(k): r for k, r in strats[v].rule_report.items()},
                         "rates_MBps": None if strats[v].rule_rates is None else {
                             k: getattr(strats[v].rule_rates, k) / 1e6
                             for k in ("h2d", "d2h", "r2r", "reuse")}}
                     for v in RULE_VARIANTS}
        del strats
    return out


def _rule_combine(per_rank: list[dict], name: str, v: str) -> dict:
    rs = [r[name][v] for r in per_rank]
    slowest = [max(ts) for ts in zip(*(r["epoch_s"] for r in rs))]
    row = {"epoch_s": statistics.median(slowest), "epoch_s_all": slowest,
           "losses": rs[0]["losses"], "modes": rs[0]["modes"], "rule": rs[0]["rule"],
           "rates_MBps_rank0": rs[0]["rates_MBps"],
           "peak_device_bytes": max(r["peak_device_bytes"] for r in rs),
           "device_bound_bytes": max(r["device_bound_bytes"] for r in rs),
           "peak_within_bound": all(r["peak_device_bytes"] <= r["device_bound_bytes"]
                                    for r in rs),
           "recompute_s": max(r["recompute_time"] for r in rs)}
    for k in ("bytes_host_to_device", "bytes_device_to_host", "bytes_rank_to_rank",
              "bytes_reused", "rows_host_loaded", "edges_computed"):
        row[k] = sum(r[k] for r in rs)
    return row


def run_rule(quick: bool) -> dict:
    """auto against recompute and cache throughout, side by side (see the module docstring)."""
    cfg = rule_settings(quick)
    t_all = time.perf_counter()
    results: dict = {"graphs": {}, "rows": {}}
    ratios: dict = {}
    for gname, spec in cfg["graphs"].items():
        graph = generate(spec["preset"], scale=spec["scale"], seed=cfg["seed"])
        results["graphs"][gname] = {"nodes": graph.num_nodes, "edges": graph.num_edges,
                                    "features": graph.num_features}
        with _threads(1):
            book = _book(graph, cfg["first_level"], cfg["seed"])
        per_rank = spawn(_rule_rank, cfg["world"], graph, book, {**cfg, **spec},
                         timeout_s=3000.0, cores="auto")
        for name in per_rank[0]:
            rows = {v: _rule_combine(per_rank, name, v) for v in RULE_VARIANTS}
            key = f"{gname}/{name}/{spec['level2']}{spec['chunks']}"
            results["rows"][key] = rows
            t = {v: rows[v]["epoch_s"] for v in RULE_VARIANTS}
            ratios[key] = {
                "rule_over_best": ratio(t["auto"], min(t["cache"], t["recompute"])),
                "rule_over_cache": ratio(t["auto"], t["cache"]),
                "rule_over_recompute": ratio(t["auto"], t["recompute"]),
                "h2d_rule_over_recompute": ratio(rows["auto"]["bytes_host_to_device"],
                                                 rows["recompute"]["bytes_host_to_device"]),
                "peak_within_bound": all(r["peak_within_bound"] for r in rows.values()),
                "losses_equal": all(
                    max(abs(a - b) for a, b in zip(rows[v]["losses"], rows["auto"]["losses"]))
                    < 1e-4 for v in RULE_VARIANTS)}
    cfg["wall_s"] = time.perf_counter() - t_all
    return {"config": cfg, "results": results, "ratios": ratios}


# -- the cached transpose: each chunk's matrix and transpose built once, against per call -------
TRANSPOSE_VARIANTS = ("cached", "per_call")


def transpose_settings(quick: bool) -> dict:
    """2 ranks (the host's cores), ``products_sim``, 8 chunks per part, METIS first level."""
    base = {"world": 2, "preset": "products_sim", "seed": 0, "chunks": 8, "layers": 2,
            "hidden": 64, "first_level": "metis", "dedup": "inter+intra", "reorganize": True,
            "rows": [{"model": "gcn", "intermediate": "recompute"},
                     {"model": "sage", "intermediate": "recompute"},
                     {"model": "gcn", "intermediate": "auto"}]}
    if quick:
        return {**base, "scale": 0.02, "epochs": 3}
    return {**base, "scale": 0.05, "epochs": 5}


def _transpose_rank(topo, graph: GraphStore, book, cfg: dict) -> dict:
    """Per row and variant: every epoch's time, loss and the last epoch's volumes on this
    rank; the variants alternate epoch by epoch (the order rotating)."""

    out = {}
    for row in cfg["rows"]:
        name = f"{row['model']}/{row['intermediate']}"
        strats = {}
        for v in TRANSPOSE_VARIANTS:
            strats[v] = _offload(topo, graph, book, {**cfg, **row}, cfg["chunks"],
                                 dedup=cfg["dedup"], reorganize=cfg["reorganize"],
                                 intermediate=row["intermediate"])
            strats[v].cached_products = v == "cached"
        times, losses, last = _alternate(strats, cfg["epochs"])  # epoch 0: matrices built
        out[name] = {v: {"epoch_s": times[v], "losses": losses[v],
                         "recompute_s": last[v]["recompute_time"],
                         **{k: last[v][k] for k in ("bytes_host_to_device", "edges_computed",
                                                    "peak_device_bytes",
                                                    "device_bound_bytes")},
                         "modes": ["".join("c" if x == "cache" else "r" for x in ms)
                                   for ms in strats[v].modes]}
                     for v in TRANSPOSE_VARIANTS}
        del strats
    return out


def run_transpose(quick: bool) -> dict:
    """Offload's chunk products with the matrix and transpose built once (``cached``, the
    default) against the model's own product per call, whose backward re-transposes
    (``per_call``), side by side: the median epoch of the slowest rank per variant and their
    ratio, the losses of every epoch (equal bit for bit), the volumes (equal) and the peak
    against the bound."""
    cfg = transpose_settings(quick)
    t_all = time.perf_counter()
    graph = generate(cfg["preset"], scale=cfg["scale"], seed=cfg["seed"])
    with _threads(1):
        book = _book_of(graph, cfg["first_level"], cfg["seed"], cfg["world"])
    per_rank = spawn(_transpose_rank, cfg["world"], graph, book, cfg, timeout_s=3000.0,
                     cores="auto")
    results: dict = {"graph": {"nodes": graph.num_nodes, "edges": graph.num_edges,
                               "features": graph.num_features}, "rows": {}}
    ratios: dict = {}
    for name in per_rank[0]:
        rows = {}
        for v in TRANSPOSE_VARIANTS:
            rs = [r[name][v] for r in per_rank]
            slowest = [max(ts) for ts in zip(*(r["epoch_s"] for r in rs))]
            rows[v] = {"epoch_s": statistics.median(slowest), "epoch_s_all": slowest,
                       "losses": rs[0]["losses"], "modes": rs[0]["modes"],
                       "recompute_s": max(r["recompute_s"] for r in rs),
                       "peak_device_bytes": max(r["peak_device_bytes"] for r in rs),
                       "device_bound_bytes": max(r["device_bound_bytes"] for r in rs),
                       "peak_within_bound": all(r["peak_device_bytes"] <= r["device_bound_bytes"]
                                                for r in rs),
                       **{k: sum(r[k] for r in rs) for k in ("bytes_host_to_device",
                                                             "edges_computed")}}
        results["rows"][name] = rows
        c, p = rows["cached"], rows["per_call"]
        ratios[name] = {"cached_over_per_call": ratio(c["epoch_s"], p["epoch_s"]),
                        "losses_bit_identical": c["losses"] == p["losses"],
                        "volumes_equal": all(c[k] == p[k] for k in ("bytes_host_to_device",
                                                                     "edges_computed")),
                        "peak_within_bound": c["peak_within_bound"]}
    cfg["wall_s"] = time.perf_counter() - t_all
    return {"config": cfg, "results": results, "ratios": ratios}


def _book_of(graph: GraphStore, name: str, seed: int, world: int):
    from gnnscale.partition import get_partition
    from gnnscale.registry import build, option

    return get_partition(graph, build(option("partitioner", name, seed=seed)), world, log=None)


PARTS = {"rule": run_rule, "transpose": run_transpose}


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.offload rule|transpose [--quick] [--out PATH]``: one part."""
    from benchmarks.__main__ import run_part

    args = sys.argv[1:] if argv is None else argv
    part = args[0] if args and args[0] in PARTS else "rule"
    return run_part("offload", part, PARTS[part], args, main.__doc__)


if __name__ == "__main__":
    sys.exit(main())
