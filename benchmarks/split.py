"""Benchmark suite ``split``: split parallelism (GSplit) vs data parallelism, 4 ranks.

Workload: the products-like synthetic graph, METIS into 4 parts, 3 layers, batch sizes and
cache ratios below. Volumes (deterministic, computed in-process over a fixed number of steps
of the shared schedule, not whole epochs):

- ``redundancy_pct``: edges ``data`` computes (4 micro-batches of b/4) over those ``split``
  computes (one mini-batch of b, each sampled edge once), minus 100% (GSplit Table 2);
- ``local_edge_ratio`` and ``edge_skew`` of the split (GSplit Table 5);
- host-to-rank bytes: ``split`` (partitioned degree cache) vs ``data`` with its better
  placement (replicated or partitioned degree cache).

Parallel split-samplers (whole epochs, 4 and then 2 spawned gloo ranks, in one run): ``split`` with
``sample_on=leader`` (rank 0 samples every step and broadcasts it; every rank splits it) vs
``sample_on=all`` (step s sampled and split by rank s mod world, each rank receiving only its part)
vs ``data``: per rank and step, sampling+split seconds and sample bytes received; epoch times.

Times (4 spawned gloo ranks on this machine): median step time of ``data``, ``split``
(depcomm), ``split`` + ``hybrid`` (the cost model decides) and ``split`` + ``hybrid_forced``
(replicates whatever the memory cap allows: what replication costs here) after a warm-up
step, at the largest cache ratio; an
epoch has the same number of steps for both strategies, so step ratios are epoch ratios.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from benchmarks import ratio
from gnnscale.cache.store import owner_map, select_cached
from gnnscale.data.synthetic import generate
from gnnscale.distributed import spawn
from gnnscale.partition.book import PartitionBook
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.schedule import epoch_batches, micro_batch, sample_seed
from gnnscale.strategies.split.splitter import split_sample

WORLD = 4


def settings(quick: bool) -> dict:
    if quick:
        return {"scale": 0.01, "fanouts": [10, 10, 10], "batch_sizes": [256, 1024],
                "ratios": [0.0, 0.25], "hidden": 64, "volume_steps": 3, "timed_steps": 2,
                "epochs": 2, "seed": 0}
    return {"scale": 0.05, "fanouts": [20, 20, 20], "batch_sizes": [1024, 4096],
            "ratios": [0.0, 0.25], "hidden": 128, "volume_steps": 4, "timed_steps": 3,
            "epochs": 3, "seed": 0}


def _partition(graph, seed: int, world: int = WORLD) -> torch.Tensor:
    from gnnscale.partition import get_partition
    from gnnscale.partition.metis import MetisPartitioner

    return get_partition(graph, MetisPartitioner(seed=seed), world, log=None).part.int()


def _caches(graph, part: torch.Tensor, r: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Degree caches of ``r * N`` rows per rank: (replicated hot set, partitioned owner map)."""
    n = graph.num_nodes
    cap = int(r * n)
    heat = graph.out_degree().double()
    hot = torch.zeros(n, dtype=torch.bool)
    hot[select_cached(heat, cap)] = True
    sets = [select_cached(heat, cap, placement="partitioned", part=part.long(), rank=q)
            for q in range(WORLD)]
    return hot, owner_map(sets, n)


def volumes(graph, part: torch.Tensor, cfg: dict, b: int, r: float) -> dict:
    """Edges, locality, skew and host bytes over ``volume_steps`` steps of epoch 0."""
    sampler = NeighborSampler(cfg["fanouts"])
    hot, owner = _caches(graph, part, r)
    own_in = torch.where(owner >= 0, owner, part).int()
    row = graph.num_features * graph.x.element_size()
    batches = epoch_batches(graph.train_idx, b, cfg["seed"], 0, min_size=WORLD)
    e_split = e_data = host_split = host_rep = host_part = 0
    local = total = 0
    per_rank = [0] * WORLD
    t_split = []
    for step, batch in enumerate(batches[:cfg["volume_steps"]]):
        mb = sampler.sample(graph, batch, sample_seed(cfg["seed"], 0, step, 0))
        t0 = time.perf_counter()
        plans = [split_sample(mb, own_in, part, WORLD, q) for q in range(WORLD)]
        t_split.append((time.perf_counter() - t0) / WORLD)
        e_split += mb.num_edges
        local += plans[0].local_edges
        total += plans[0].total_edges
        per_rank = [a + c for a, c in zip(per_rank, plans[0].edges_per_rank)]
        host_split += int((owner[mb.input_nodes] < 0).sum())
        for q in range(WORLD):
            m = sampler.sample(graph, micro_batch(batch, WORLD, q),
                               sample_seed(cfg["seed"], 0, step, q))
            e_data += m.num_edges
            host_rep += int((~hot[m.input_nodes]).sum())
            host_part += int((owner[m.input_nodes] < 0).sum())
    mean = sum(per_rank) / WORLD
    return {
        "edges_split": e_split, "edges_data": e_data,
        "redundancy_pct": 100.0 * (e_data - e_split) / max(e_split, 1),
        "local_edge_ratio": local / max(total, 1), "edge_skew": max(per_rank) / mean,
        "bytes_host_split": host_split * row,
        "bytes_host_data_best": min(host_rep, host_part) * row,
        "data_best_placement": "replicated" if host_rep <= host_part else "partitioned",
        "split_op_ms_per_rank": 1e3 * statistics.median(t_split),
    }


def _timed_rank(topo, graph, part, cfg: dict, variants: list[tuple]) -> dict:
    """Median step time of each (strategy, deps, batch size, cache ratio) variant."""
    from gnnscale import registry
    from gnnscale.partition.provider import FixedPartition
    from gnnscale.strategies.base import RunContext

    book = PartitionBook.from_edge_cut(graph, part, WORLD)
    out = {}
    for name, deps, b, r, placement, *opts in variants:
        torch.manual_seed(0)
        model = registry.build(registry.option(
            "model", "sage", hidden=cfg["hidden"], num_layers=len(cfg["fanouts"]), dropout=0.0),
            in_channels=graph.num_features, out_channels=graph.num_classes)
        # hybrid_forced: every remote dependency the memory cap allows is replicated
        dm = registry.build(registry.option("deps", "hybrid", comm_weight=1e6)
                            if deps == "hybrid_forced" else registry.option("deps", deps))
        ctx = RunContext(topo=topo, graph=graph, model=model,
                         sampler=NeighborSampler(cfg["fanouts"]),
                         cache_policy=registry.build(registry.option(
                             "cache", "degree", ratio=r, placement=placement)),
                         deps=dm, partition=FixedPartition(book), seed=cfg["seed"],
                         optim=registry.build(registry.option("optim", "adam")))
        strat = registry.build(registry.option("strategy", name, batch_size=b, prefetch=0,
                                               **dict(opts)), ctx=ctx)
        strat.setup()
        steps = strat.num_steps(0)
        times, extra = [], {}
        for step in range(cfg["timed_steps"] + 1):
            t0 = time.perf_counter()
            strat.step(0, step % steps)
            if name == "split":
                extra = {"replicated_rows": strat.last_plan.replicated}
            times.append(time.perf_counter() - t0)
        tag = "".join(f"/{k}={v}" for k, v in opts)
        out[f"{name}/{deps}{tag}/b{b}/r{r}"] = {"step_s": statistics.median(times[1:]), **extra}
        strat.close()
    return out


def _epoch_rank(topo, graph, part, cfg: dict, variants: list[tuple], epochs: int) -> dict:
    """Per (strategy, sample_on, batch) variant: this rank's median epoch time, and per step its
    sampling+split seconds and sample bytes received (epochs after a warm-up one)."""
    from gnnscale import registry
    from gnnscale.partition.provider import FixedPartition
    from gnnscale.strategies.base import RunContext

    book = PartitionBook.from_edge_cut(graph, part, topo.world_size)
    out = {}
    for name, on, b in variants:
        torch.manual_seed(0)
        model = registry.build(registry.option(
            "model", "sage", hidden=cfg["hidden"], num_layers=len(cfg["fanouts"]), dropout=0.0),
            in_channels=graph.num_features, out_channels=graph.num_classes)
        deps = "hybrid" if name == "split" else "depcache"  # each strategy's default
        ctx = RunContext(topo=topo, graph=graph, model=model,
                         sampler=NeighborSampler(cfg["fanouts"]),
                         cache_policy=registry.build(registry.option("cache", "none")),
                         deps=registry.build(registry.option("deps", deps)),
                         partition=FixedPartition(book), seed=cfg["seed"],
                         optim=registry.build(registry.option("optim", "adam")))
        extra = {"sample_on": on} if name == "split" else {}
        strat = registry.build(registry.option("strategy", name, batch_size=b, **extra),
                               ctx=ctx)
        strat.setup()
        rows = [strat.train_epoch(e) for e in range(epochs + 1)][1:]
        steps = rows[0]["steps"]
        out[f"{name}/{on}/b{b}"] = {
            "epoch_s": statistics.median(r["epoch_time"] for r in rows),
            "sample_split_s_per_step": statistics.median(
                (r["sample_time"] + r.get("split_time", 0.0)) / steps for r in rows),
            "bytes_received_per_step": statistics.median(
                r.get("bytes_sample_received", 0.0) / steps for r in rows)}
        strat.close()
    return out


def parallel_samplers(graph, part, cfg: dict, world: int = WORLD) -> tuple[dict, dict]:
    """sample_on=leader vs all vs data on ``world`` ranks (``part`` has ``world`` parts), whole
    epochs in one run: results and ratios."""
    variants = [(name, on, b) for b in cfg["batch_sizes"]
                for name, on in (("split", "leader"), ("split", "all"), ("data", "-"))]
    ranks = spawn(_epoch_rank, world, graph, part, cfg, variants, cfg["epochs"],
                  timeout_s=1800.0, cores="auto")
    results, ratios = {}, {}
    for key in ranks[0]:
        results[key] = {
            "epoch_s": max(r[key]["epoch_s"] for r in ranks),
            "sample_split_s_per_step_max_rank": max(r[key]["sample_split_s_per_step"]
                                                    for r in ranks),
            "bytes_received_per_step_per_rank": [r[key]["bytes_received_per_step"]
                                                 for r in ranks]}
    for b in cfg["batch_sizes"]:
        lead, par = (results[f"split/{on}/b{b}"] for on in ("leader", "all"))
        data = results[f"data/-/b{b}"]
        ratios[f"b{b}"] = {
            "sample_split_all_over_leader": ratio(par["sample_split_s_per_step_max_rank"],
                                                  lead["sample_split_s_per_step_max_rank"]),
            "bytes_received_all_over_leader": ratio(
                max(par["bytes_received_per_step_per_rank"]),
                max(lead["bytes_received_per_step_per_rank"])),
            "epoch_split_all_over_data": ratio(par["epoch_s"], data["epoch_s"]),
            "epoch_split_leader_over_data": ratio(lead["epoch_s"], data["epoch_s"])}
    return results, ratios


def run(quick: bool) -> dict:
    cfg = settings(quick)
    graph = generate("products_sim", scale=cfg["scale"], seed=cfg["seed"])
    part = _partition(graph, cfg["seed"])
    results: dict = {"redundancy_pct": {}, "local_edge_ratio": {}, "edge_skew": {},
                     "volumes": {}, "step_time_s": {}}
    ratios: dict = {"bytes_data_over_split": {}, "epoch_data_over_split": {},
                    "depcomm_over_hybrid": {}, "depcomm_over_hybrid_forced": {},
                    "gsplit_over_default": {}, "shuffle_over_read": {}}
    for b in cfg["batch_sizes"]:
        for r in cfg["ratios"]:
            v = volumes(graph, part, cfg, b, r)
            key = f"b{b}/r{r}"
            results["volumes"][key] = v
            ratios["bytes_data_over_split"][key] = ratio(v["bytes_host_data_best"],
                                                         v["bytes_host_split"])
        results["redundancy_pct"][f"b{b}"] = v["redundancy_pct"]
        results["local_edge_ratio"][f"b{b}"] = v["local_edge_ratio"]
        results["edge_skew"][f"b{b}"] = v["edge_skew"]
    # The smallest per-rank cache that holds the largest partition: split's host bytes are zero.
    cover = (float(torch.bincount(part.long(), minlength=WORLD).max()) + 0.5) / graph.num_nodes
    results["full_cover"] = {"ratio": cover, **{
        f"b{b}": volumes(graph, part, cfg, b, cover)["bytes_host_split"]
        for b in cfg["batch_sizes"]}}
    r = max(cfg["ratios"])
    variants = []
    for b in cfg["batch_sizes"]:
        variants += [("data", "depcache", b, r, "replicated"),
                     # GSplit's setting (inputs shuffled by their owners, depcomm)
                     ("split", "depcomm", b, r, "partitioned", ("inputs", "shuffle")),
                     ("split", "depcomm", b, r, "partitioned"),
                     ("split", "hybrid", b, r, "partitioned"),
                     ("split", "hybrid_forced", b, r, "partitioned")]
    t0 = time.perf_counter()
    timed = spawn(_timed_rank, WORLD, graph, part, cfg, variants, timeout_s=1200.0,
                  cores="auto")
    wall = time.perf_counter() - t0
    for key in timed[0]:
        results["step_time_s"][key] = max(t[key]["step_s"] for t in timed)
        if "replicated_rows" in timed[0][key]:
            results["step_time_s"][key + "/replicated_rows"] = sum(
                t[key]["replicated_rows"] for t in timed)
    for b in cfg["batch_sizes"]:
        st = results["step_time_s"]
        ratios["epoch_data_over_split"][f"b{b}/r{r}"] = ratio(
            st[f"data/depcache/b{b}/r{r}"], st[f"split/hybrid/b{b}/r{r}"])  # the default
        ratios["gsplit_over_default"][f"b{b}/r{r}"] = ratio(
            st[f"split/depcomm/inputs=shuffle/b{b}/r{r}"], st[f"split/hybrid/b{b}/r{r}"])
        ratios["shuffle_over_read"][f"b{b}/r{r}"] = ratio(
            st[f"split/depcomm/inputs=shuffle/b{b}/r{r}"], st[f"split/depcomm/b{b}/r{r}"])
        ratios["depcomm_over_hybrid"][f"b{b}/r{r}"] = ratio(
            st[f"split/depcomm/b{b}/r{r}"], st[f"split/hybrid/b{b}/r{r}"])
        ratios["depcomm_over_hybrid_forced"][f"b{b}/r{r}"] = ratio(
            st[f"split/depcomm/b{b}/r{r}"], st[f"split/hybrid_forced/b{b}/r{r}"])
    cfg["timed_wall_s"] = wall
    results["parallel_samplers"], ratios["parallel_samplers"] = parallel_samplers(graph, part,
                                                                                cfg)
    # the same comparison on 2 ranks (2 METIS parts): one rank per core here
    results["parallel_samplers_2ranks"], ratios["parallel_samplers_2ranks"] = parallel_samplers(
        graph, _partition(graph, cfg["seed"], 2), cfg, world=2)
    cfg["graph"] = {"nodes": graph.num_nodes, "edges": graph.num_edges,
                    "train": int(graph.train_idx.numel())}
    results["defaults_2ranks"], ratios["defaults_2ranks"] = defaults_2ranks(quick)
    return {"config": cfg, "results": results, "ratios": ratios}


# -- the default against GSplit's setting and data, through the runner (2 ranks) ------------
DEFAULT_VARIANTS = {  # name: extra overrides
    "data": [],
    "split_gsplit": ["deps=depcomm", "strategy.inputs=shuffle"],  # GSplit's setting
    "split_read_depcomm": ["deps=depcomm", "strategy.inputs=read"],
    "split_default": [],  # inputs=auto (read on CPU), deps=hybrid
}


def defaults_2ranks(quick: bool) -> tuple[dict, dict]:
    """``data`` against ``split`` in GSplit's setting (inputs shuffled, depcomm), with inputs
    read (depcomm), and by default (inputs read, hybrid), whole epochs through the runner on 2
    ranks (one thread each, bound) at the roofline suite's node workload, batch 256 and 1024;
    the variants alternate over ``rounds`` runs; per variant the median over rounds of each
    run's median epoch (after the first), its phases and volumes."""
    import tempfile
    from pathlib import Path

    from benchmarks import compose_run
    from benchmarks.roofline import overrides, settings
    from gnnscale.compare.runs import load_run
    from gnnscale.runner.run import run as run_cfg

    cfg = settings(quick)
    cfg["epochs"] = 4 if quick else 10
    rounds = 2 if quick else 3
    per: dict = {}
    with tempfile.TemporaryDirectory() as d:
        for k in range(rounds):
            for b in (256, 1024):
                cfg["batch"]["node"] = b
                for name, extra in DEFAULT_VARIANTS.items():
                    strategy = "data" if name == "data" else "split"
                    folder = Path(d) / f"{name}-b{b}-{k}"
                    run_cfg(compose_run(overrides(cfg, strategy, None, "node") + extra, folder,
                                        Path(d) / "data"))
                    hist = load_run(folder).history[1:]
                    row = {key: statistics.median(h.get(key, 0.0) for h in hist) for key in (
                        "epoch_time", "sample_time", "split_time", "load_time", "compute_time",
                        "comm_time", "bytes_shuffled", "bytes_host_to_rank", "replicated_rows",
                        "edges_computed")}
                    per.setdefault(f"b{b}/{name}", []).append(row)
    results = {key: {**{m: statistics.median(r[m] for r in rows) for m in rows[0]},
                     "epoch_s_runs": [r["epoch_time"] for r in rows]}
               for key, rows in per.items()}
    ratios = {}
    for b in (256, 1024):
        t = {name: results[f"b{b}/{name}"]["epoch_time"] for name in DEFAULT_VARIANTS}
        ratios[f"b{b}"] = {"gsplit_over_default": ratio(t["split_gsplit"], t["split_default"]),
                           "shuffle_over_read": ratio(t["split_gsplit"],
                                                      t["split_read_depcomm"]),
                           "default_over_data": ratio(t["split_default"], t["data"]),
                           "gsplit_over_data": ratio(t["split_gsplit"], t["data"])}
    return results, ratios


def run_defaults(quick: bool) -> dict:
    """The suite's :func:`defaults_2ranks` part alone."""
    results, ratios = defaults_2ranks(quick)
    return {"results": {"defaults_2ranks": results}, "ratios": {"defaults_2ranks": ratios}}


# -- the split op alone -----------------------------------------------------------------------
def run_op(quick: bool) -> dict:
    """One-thread ``split_sample_all`` (the native op, then the plans built from its output,
    :func:`gnnscale.strategies.split.splitter.split_sample_all`) on the roofline suite's
    products-like graph (scale 0.02, fanouts 10,10), per batch, world and layer-0 owners
    (random, METIS): with the inputs shuffled and read (``read_in``: layer 0's lists left
    out), each rank's packed plan (int32 words) too, and sampling the same batch; the variants
    alternate over ``repeats`` rounds of the same samples, medians in ms."""
    from benchmarks.roofline import settings as roofline_settings
    from gnnscale.ops import split as native_split
    from gnnscale.strategies.split import splitter

    torch.set_num_threads(1)
    rcfg = roofline_settings(quick)
    graph = generate("products_sim", scale=rcfg["scale"]["node"], seed=0)
    sampler = NeighborSampler(rcfg["fanouts"])
    repeats, samples = (5, 2) if quick else (15, 4)
    rows: dict = {}
    for world in (2, 4):
        owners = {"random": torch.randint(0, world, (graph.num_nodes,),
                                          generator=torch.Generator().manual_seed(0)).int(),
                  "metis": _partition(graph, 0, world)}
        for b in (256, 1024):
            batches = [graph.train_idx[torch.randperm(
                graph.train_idx.numel(), generator=torch.Generator().manual_seed(k))[:b]]
                for k in range(samples)]
            mbs = [sampler.sample(graph, seeds, k) for k, seeds in enumerate(batches)]
            fns = {"sample": lambda batches=batches: [sampler.sample(graph, seeds, 0)
                                                      for seeds in batches]}
            for name, own in owners.items():
                args = [splitter._native_args(mb, own, own) for mb in mbs]
                zero = splitter._costs(mbs[0], None)
                for mode, read in (("shuffle", False), ("read", True)):
                    fns[f"{name}/{mode}/op"] = (
                        lambda args=args, read=read, world=world, zero=zero: [
                            native_split.split_sample_all(*a, world, False, zero, 0, 1, False,
                                                          read) for a in args])
                    fns[f"{name}/{mode}/plans"] = (
                        lambda own=own, read=read, world=world, mbs=mbs: [
                            splitter.split_sample_all(mb, own, own, world, read_inputs=read)
                            for mb in mbs])
            times: dict = {k: [] for k in fns}
            for _ in range(repeats):
                for k, fn in fns.items():
                    t0 = time.perf_counter()
                    fn()
                    times[k].append((time.perf_counter() - t0) / samples * 1e3)
            row = {k: statistics.median(v) for k, v in times.items()}
            for name, own in owners.items():
                for mode, read in (("shuffle", False), ("read", True)):
                    plans = splitter.split_sample_all(mbs[0], own, own, world,
                                                      read_inputs=read)
                    row[f"{name}/{mode}/packed_words"] = sum(
                        splitter.pack_plan(p).numel() for p in plans[1:])
            rows[f"w{world}/b{b}"] = row
    ratios = {key: {f"{name}/shuffle_over_read": ratio(row[f"{name}/shuffle/op"],
                                                        row[f"{name}/read/op"])
                    for name in ("random", "metis")} for key, row in rows.items()}
    return {"config": {"scale": rcfg["scale"]["node"], "fanouts": rcfg["fanouts"],
                       "repeats": repeats, "samples": samples, "threads": 1},
            "results": {"op_ms": rows}, "ratios": {"op": ratios}}


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.split defaults|op [--quick] [--out PATH]``: the split suite's
    2-rank comparison through the runner alone (``split-defaults[-quick].json``), or the
    split op alone (:func:`run_op`, ``split-op[-quick].json``)."""
    from benchmarks.__main__ import run_part

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["op"]:
        return run_part("split", "op", run_op, argv, main.__doc__)
    return run_part("split", "defaults", run_defaults, argv, main.__doc__)


if __name__ == "__main__":
    raise SystemExit(main())
