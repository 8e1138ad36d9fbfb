"""Suite ``growth``: does an epoch get slower the longer a run goes? Every strategy, many epochs.

Each strategy (``data``, ``split``, ``factored``, ``fullgraph``, ``offload``) trains the
``tiny`` synthetic graph (2,000 nodes, ~20,000 edges; GraphSAGE, 2 layers, 16 hidden) on 2 gloo
ranks through the runner, as ``train.py`` does, for ``epochs`` epochs with an evaluation after
every epoch (``eval_every=1``: a structure that grows per evaluation shows at its fastest), one
run after the other. Per strategy, from the run's history (each epoch's time is the slowest
rank's): the median epoch and evaluation time of the first decile of epochs (the first epoch
left out: warm-up, and ``offload``'s rule decides in it) and of the last decile, and their
ratio. A flat run has ratio ~1; a run whose epochs grow with the epochs run (``offload``
before its device tier stopped keeping a reference per batch: 0.19 s -> 1.67 s over 180 Cora
epochs) has a ratio well above 1. ``train_loss`` of the first and last epoch is recorded, so
a run that stopped learning cannot pass as flat.

Ratios: ``last_over_first.<strategy>`` (epoch), ``eval_last_over_first.<strategy>``;
``worst`` = the largest epoch ratio (target ~1: every strategy flat).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from benchmarks import compose_run

STRATEGIES = ("data", "split", "factored", "fullgraph", "offload")
WORLD = 2


def settings(quick: bool) -> dict:
    return {"preset": "tiny", "model": "sage", "layers": 2, "hidden": 16, "world": WORLD,
            "epochs": 60 if quick else 200, "eval_every": 1, "strategies": list(STRATEGIES)}


def _overrides(cfg: dict, strategy: str) -> list[str]:
    out = ["dataset=synthetic", f"dataset.preset={cfg['preset']}", f"model={cfg['model']}",
           f"model.hidden={cfg['hidden']}", f"model.num_layers={cfg['layers']}",
           f"strategy={strategy}", f"epochs={cfg['epochs']}",
           f"eval_every={cfg['eval_every']}", "checkpoint=false", "logger=none",
           f"dist.world_size={cfg['world']}"]
    if strategy in ("data", "split", "factored"):
        out += ["sampler.fanouts=[5,5]", "strategy.batch_size=128"]
    return out


def _compose(tmp: Path, strategy: str, cfg: dict) -> dict:
    """The config ``train.py`` composes for ``strategy``, validated (data prepared once)."""
    from omegaconf import OmegaConf

    from gnnscale.runner.validate import validate

    conf = compose_run(_overrides(cfg, strategy), tmp / strategy, tmp / "data")
    validate(conf)
    return OmegaConf.to_container(conf, resolve=True, enum_to_str=True)


def _rank(topo, confs: dict[str, dict], epochs: int) -> dict:
    """Every strategy built on this rank; epochs in turn (each strategy's epoch, then its
    evaluation, the order rotating each round); per strategy the slowest rank's seconds."""
    import contextlib
    import io

    import torch
    import torch.distributed as dist
    from omegaconf import OmegaConf

    from gnnscale import registry
    from gnnscale.runner.worker import build_context

    strats = {}
    for name, conf in confs.items():
        cfg = OmegaConf.create(conf)
        with contextlib.redirect_stdout(io.StringIO()):  # plans, rule reports
            strat = registry.build(cfg.strategy, ctx=build_context(topo, cfg))
            strat.setup()
        strats[name] = (strat, cfg.eval_batch_size)
    names = list(strats)
    out = {n: {"epoch_s": [], "eval_s": [], "loss": []} for n in names}
    try:
        for epoch in range(epochs):
            shift = epoch % len(names)
            for name in names[shift:] + names[:shift]:
                strat, batch = strats[name]
                dist.barrier()
                t0 = time.perf_counter()
                with contextlib.redirect_stdout(io.StringIO()):
                    m = strat.train_epoch(epoch)
                t1 = time.perf_counter()
                if strat.reports:
                    strat.evaluate(batch)
                t2 = time.perf_counter()
                local = torch.tensor([t1 - t0, t2 - t1, m.get("train_loss", 0.0)
                                      if strat.reports else 0.0], dtype=torch.float64)
                took = local[:2].clone()
                dist.all_reduce(took, op=dist.ReduceOp.MAX)
                loss = local[2:].clone()
                dist.all_reduce(loss, op=dist.ReduceOp.MAX)
                out[name]["epoch_s"].append(float(took[0]))
                out[name]["eval_s"].append(float(took[1]))
                out[name]["loss"].append(float(loss[0]))
    finally:
        for strat, _ in strats.values():
            strat.close()
    return out


def decile_ratio(values: list[float]) -> dict:
    """The first and the last tenth of ``values`` (the first value, warm-up, left out): each
    one's fastest and median, and last / first of both. The fastest is the figure to judge: a
    busy host slows some epochs, a growing structure slows every one."""
    xs = values[1:]
    n = max(1, len(xs) // 10)
    head, tail = xs[:n], xs[-n:]
    out = {"first_min_s": min(head), "last_min_s": min(tail),
           "first_median_s": statistics.median(head), "last_median_s": statistics.median(tail)}
    out["min_last_over_first"] = out["last_min_s"] / out["first_min_s"]
    out["median_last_over_first"] = out["last_median_s"] / out["first_median_s"]
    return out


def run(quick: bool = False) -> dict:
    from gnnscale.distributed import spawn

    cfg = settings(quick)
    t_all = time.perf_counter()
    results: dict = {}
    ratios: dict = {"last_over_first": {}, "eval_last_over_first": {}}
    with tempfile.TemporaryDirectory() as d:
        confs = {s: _compose(Path(d), s, cfg) for s in cfg["strategies"]}
        per_rank = spawn(_rank, cfg["world"], confs, cfg["epochs"], timeout_s=3000.0,
                         cores="auto")
    got = per_rank[0]
    for name in cfg["strategies"]:
        r = got[name]
        epoch, ev = decile_ratio(r["epoch_s"]), decile_ratio(r["eval_s"])
        results[name] = {"epoch": epoch, "eval": ev, "epoch_s_all": r["epoch_s"],
                         "eval_s_all": r["eval_s"], "first_loss": r["loss"][0],
                         "last_loss": r["loss"][-1]}
        ratios["last_over_first"][name] = epoch["min_last_over_first"]
        ratios["eval_last_over_first"][name] = ev["min_last_over_first"]
    ratios["worst"] = max(ratios["last_over_first"].values())
    ratios["worst_eval"] = max(ratios["eval_last_over_first"].values())
    cfg["wall_s"] = time.perf_counter() - t_all
    return {"config": cfg, "results": results, "ratios": ratios}
