"""What every rank runs: build components, train, evaluate, checkpoint, report."""

from __future__ import annotations

import json
import math
import os
import socket
import time
from pathlib import Path
from typing import Any, cast

import torch
import torch.distributed as dist
from omegaconf import DictConfig, OmegaConf

from gnnscale import registry
from gnnscale.data.graph import GraphStore
from gnnscale.data.publish import write_text_atomic
from gnnscale.data.schemas import parse_budget
from gnnscale.distributed.collectives import group_rank, group_size
from gnnscale.distributed.launch import Topology
from gnnscale.evaluation.footprint import Footprint
from gnnscale.partition.parts import PartLayout, format_host_report, host_report
from gnnscale.partition.provider import CachedPartitions, PartitionProvider
from gnnscale.runner import checkpoint
from gnnscale.runner.loggers.console import RunLog, is_verbose, on_a_terminal, run_log
from gnnscale.runner.metrics import (
    MetricsWriter,
    declared_reductions,
    peak_memory,
    reduce_over_ranks,
    summary_columns,
    summary_table,
)
from gnnscale.runner.phases import LAUNCH_ENV, Phases
from gnnscale.runner.plan import RunPlan
from gnnscale.runner.selection import (
    agree,
    reported,
    selected_record,
    selection_metric,
    stop_reason,
)
from gnnscale.strategies.base import (  # noqa: F401 - build_task re-exported
    RunContext,
    SamplingStrategy,
    Strategy,
    build_task,
)
from gnnscale.tasks.config import TaskConfig

# The fork server preloads this module (distributed/launch.py PRELOAD): importing every option
# module here (torch, PyG, every strategy) means a forked rank imports nothing more.
registry.import_all()


class TimedPartitions:
    """The run's partition provider, timing each ``get`` as the ``partition`` phase."""

    def __init__(self, inner: PartitionProvider, phases: Phases) -> None:
        self.inner, self.phases = inner, phases

    def get(self, *args: Any, **kwargs: Any):
        """The inner provider's book, timed."""
        with self.phases.time("partition"):
            return self.inner.get(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def build_context(topo: Topology, cfg: DictConfig, phases: Phases | None = None,
                  plan: RunPlan | None = None) -> RunContext:
    """Every component from its own sub-config plus the runtime objects it needs; the task,
    graph and model from the run's ``plan`` (:meth:`~gnnscale.runner.plan.RunPlan.build`;
    planned here from ``cfg``, a settled config, when not given)."""
    phases = phases or Phases()
    registry.load_all()
    plan = plan if plan is not None else RunPlan.of(cfg)
    layout = PartLayout(cfg.parts) if cfg.get("parts") else None  # this rank's part only
    with phases.time("dataset"):  # a sampling strategy: the whole topology, its own rows
        task, graph = plan.build_task(None if layout is None else layout.open_part(
            topo.rank, topology=plan.strategy.samples))
    with phases.time("model_build"):
        model = plan.build_model(graph, task)
    provider = layout.partitions() if layout is not None else \
        CachedPartitions(graph, cfg.partitioner, Path(cfg.data_root) / "partitions")
    partitions = TimedPartitions(provider, phases)
    cache_policy = registry.build(cfg.cache)
    if getattr(cache_policy, "memory_budget", 0) is None:  # the disk tier's default budget
        cache_policy.memory_budget = parse_budget(cfg.dataset.get("memory_budget"))
    return RunContext(
        topo=topo, graph=graph, model=model,
        sampler=registry.build(cfg.sampler) if cfg.get("sampler") is not None else None,
        cache_policy=cache_policy, deps=registry.build(cfg.deps),
        partition=cast(PartitionProvider, partitions), optim=registry.build(cfg.optim),
        seed=cfg.seed, task=task,
    )


def rank_main(topo: Topology, cfg_dict: dict, run_dir: str, plan: RunPlan | None = None
              ) -> dict | None:
    """Train on this rank; rank 0 returns the results, the others None. ``plan``: the run's,
    as the launcher checked it (planned here from ``cfg_dict``, a settled config, when not
    given). Rank 0 tees what it prints into the run folder's ``train.log``
    (:mod:`~gnnscale.runner.loggers.console`): its routine lines (the graph, each epoch, the
    summary table) reach the terminal only when the run is verbose."""
    if topo.rank != 0:
        return _train_rank(topo, cfg_dict, run_dir, None, plan)
    with run_log(run_dir, is_verbose(cfg_dict)) as log:
        return _train_rank(topo, cfg_dict, run_dir, log, plan)


def _train_rank(topo: Topology, cfg_dict: dict, run_dir: str,
                log: RunLog | None, plan: RunPlan | None = None) -> dict | None:
    """:func:`rank_main`'s training (``log``: rank 0's, None elsewhere).

    The runner's collectives (metrics, RNG states, evaluation, checkpoint barrier) run on the
    strategy's ``group`` and only on the ranks that report; rank 0 must report and leads.
    """
    phases = Phases()
    launched = os.environ.get(LAUNCH_ENV)
    if launched is not None:  # forking (or spawning) and the process group's start
        phases.add("ranks_start", max(0.0, time.time() - float(launched)))
    cfg = OmegaConf.create(cfg_dict)
    plan = plan if plan is not None else RunPlan.of(cfg)
    ckpt_path = Path(run_dir) / checkpoint.FILENAME
    state = resume_state(ckpt_path, bool(cfg.resume), topo)
    if state is not None and not cfg.dist.threads_per_rank and state.get("threads"):
        torch.set_num_threads(int(state["threads"]))  # the count it chose: the same bits
    ctx = build_context(topo, cfg, phases, plan)
    check_same_graph(ctx.graph, topo, cfg.data_root)
    t0 = time.perf_counter()
    strategy = registry.build(cfg.strategy, ctx=ctx)
    attach_footprint(strategy, cfg, topo.rank == 0)
    strategy.setup()
    phases.add("strategy_setup", time.perf_counter() - t0 - phases.seconds.get("partition", 0))
    leader = topo.rank == 0
    parts = parts_report(ctx.graph, None, leader)  # every rank's: a factored sampler's too
    if leader and not strategy.reports:
        raise RuntimeError(f"{type(strategy).__name__}: rank 0 must report (it leads the run)")
    history, start = _resume(strategy, state, ckpt_path, leader)
    logger = registry.build(cfg.logger) if leader else None
    writer = MetricsWriter(run_dir) if leader else None
    if writer is not None and logger is not None and log is not None:
        _rewrite_metrics(writer.path, history)  # what the checkpoint holds, nothing more
        logger.start(OmegaConf.to_container(cfg), run_dir)
        log.detail(ctx.graph.summary())
    rule, patience = _value(cfg.early_stop.rule), cfg.early_stop.patience
    reductions, task = declared_reductions(cfg, (plan.strategy, plan.task)), plan.task
    stopped = None
    try:
        for epoch in range(start, cfg.epochs):
            reason = stop_reason(history, rule, patience) if leader else None
            if agree(reason is not None, rule != "none"):  # before the epoch: a resume too
                stopped = {"after_epoch": epoch - 1, "reason": reason}
                break
            record = _epoch(epoch, cfg, strategy, phases, reductions, leader)
            if record is None:  # a rank that does not report (a factored sampler)
                continue
            history.append(record)
            if cfg.checkpoint:  # first the checkpoint, then the metrics line it covers
                _save_checkpoint(ckpt_path, strategy, epoch, history, cfg, leader)
            if writer is not None and logger is not None and log is not None:
                writer.write(record)
                logger.log_epoch(epoch, record)
                log.detail(_epoch_line(record, task))
    finally:
        strategy.close()
    if not leader or logger is None or log is None:
        return None
    if stopped is not None:
        log.detail(f"early stop after epoch {stopped['after_epoch']}: {stopped['reason']}")
    t0 = time.perf_counter()
    results = _results(history, cfg, topo, task)
    results["summary"]["stopped_after_epoch"] = stopped and stopped["after_epoch"]
    results["graph"] = graph_shape(ctx.graph)
    if parts is not None:
        results["parts"] = parts
    results["startup"] = phases.seconds
    write_text_atomic(Path(run_dir) / "results.json", json.dumps(results, indent=1))
    phases.add("write_results", time.perf_counter() - t0)
    logger.finish(results["summary"])
    log.detail("\n" + summary_table(history, summary_columns(cfg, (plan.strategy, task))))
    log.detail(f"\nresults: {os.path.join(run_dir, 'results.json')}")
    return results


def _resume(strategy: Any, state: dict | None, ckpt_path: Path, leader: bool
            ) -> tuple[list[dict], int]:
    """The history so far and the first epoch to train: from the checkpoint's ``state`` (the
    model, optimizer and, on a reporting rank, its RNG states restored), else from scratch."""
    if state is None:
        return [], 0
    strategy.module.load_state_dict(state["model"])
    strategy.optimizer.load_state_dict(state["optimizer"])
    group = strategy.group
    if strategy.reports:
        if len(state["rng"]) != group_size(group):
            raise RuntimeError(f"{ckpt_path} holds the RNG states of {len(state['rng'])} "
                               f"ranks, this run has {group_size(group)}: resume with the "
                               "world size it was written with")
        checkpoint.set_rng_state(state["rng"][group_rank(group)])
    if leader:
        print(f"resumed from {ckpt_path} after epoch {state['epoch']}", flush=True)
    return state["history"], state["epoch"] + 1


def _epoch(epoch: int, cfg: Any, strategy: Any, phases: Phases, reductions: dict,
           leader: bool) -> dict | None:
    """Train ``epoch`` (rank 0's progress bar when on); on a reporting rank, the epoch's
    record: this rank's figures reduced over the strategy's group, the footprint similarity,
    the evaluation when due (None on a rank that does not report)."""
    ctx, group = strategy.ctx, strategy.group
    bar = _progress(cfg, leader, epoch, strategy)
    pair_stats = getattr(ctx.task, "stats", None)  # link: endpoint rows exchanged
    if pair_stats is not None:
        pair_stats.reset()
    t_epoch = time.perf_counter()
    local = strategy.train_epoch(epoch, bar)
    phases.add("epochs", time.perf_counter() - t_epoch)
    if pair_stats is not None and strategy.reports:
        local["bytes_pair_exchange"] = float(pair_stats.bytes_sent)
    if bar is not None:
        bar.close()
    if not strategy.reports:
        return None
    local["peak_memory"] = peak_memory(ctx.topo.device)
    record = {"epoch": epoch, **reduce_over_ranks(local, group, reductions)}
    if strategy_footprint(strategy) is not None:
        similarity = strategy.footprint.end_epoch(group)
        if similarity is not None:  # from the second epoch on
            record["footprint_similarity"] = similarity
    last = epoch == cfg.epochs - 1
    if cfg.eval_every >= 0 and (last or (cfg.eval_every and
                                         (epoch + 1) % cfg.eval_every == 0)):
        t0 = time.perf_counter()
        record.update(strategy.evaluate(cfg.eval_batch_size))
        record["eval_time"] = time.perf_counter() - t0
        phases.add("evaluation", record["eval_time"])
        # the peak includes the evaluation's (layer-wise inference over every vertex may hold
        # more than training does); the same collective on every reporting rank
        record["peak_memory"] = reduce_over_ranks(
            {"peak_memory": peak_memory(ctx.topo.device)}, group, reductions)["peak_memory"]
    if not math.isfinite(record["train_loss"]):
        raise FloatingPointError(
            f"train_loss is {record['train_loss']} after epoch {epoch}: training "
            "diverged; lower optim.lr or check the features and labels")
    return record


def parts_report(graph: GraphStore, group: dist.ProcessGroup | None, leader: bool) -> dict | None:
    """On a run given ``parts=``: every rank's files of the layout (opened, memory-mapped:
    :meth:`~gnnscale.partition.parts.PartLayout.bytes_opened`) gathered over ``group`` (the
    runner passes the world: ranks that do not report opened parts too), and
    per host the bytes on disk and mapped, printed by rank 0 one line per host (collective);
    None otherwise."""
    layout = getattr(graph, "layout", None)
    if layout is None:
        return None
    mine = layout.bytes_opened()
    every = [mine]
    if group_size(group) > 1:
        every = [None] * group_size(group)
        dist.all_gather_object(every, mine, group=group)
    hosts = host_report(every)
    if leader:
        print(format_host_report(hosts, str(layout.root)), flush=True)
    return {"root": str(layout.root), "hosts": hosts, "ranks": every}


def resume_state(path: Path, resume: bool, topo: Topology) -> dict | None:
    """The checkpoint a run resumes from (None: it starts fresh): rank 0's, on every rank.

    Rank 0 alone writes checkpoints, so a rank on another host, whose run folder is its own,
    has none, or an older one: it receives rank 0's over the process group (each rank's copy
    is compared by its digest; nothing is sent when all agree, as on one host). A rank 0
    without a checkpoint starts every rank fresh."""
    mine = checkpoint.load_run(path) if resume and path.exists() else None
    if not resume or group_size() == 1:
        return mine
    digest = checkpoint.file_digest(path) if mine is not None else None
    digests: list = [None] * topo.world_size
    dist.all_gather_object(digests, digest)
    if all(d == digests[0] for d in digests) or digests[0] is None:
        return mine if digests[0] is not None else None
    sent: list[Any] = [mine if topo.rank == 0 else None]
    dist.broadcast_object_list(sent, src=0)
    if digest != digests[0]:
        print(f"rank {topo.rank}: resuming from rank 0's checkpoint (epoch "
              f"{sent[0]['epoch']}), sent over the process group: {path} on this host "
              f"{'is older' if mine is not None else 'does not exist'}", flush=True)
    return sent[0] if digest != digests[0] else mine


def check_same_graph(graph: GraphStore, topo: Topology, data_root: str) -> None:
    """Refuse, on every rank, a run whose ranks loaded different graphs (hosts whose data
    folders hold different processed datasets): each names its checksum against rank 0's."""
    if group_size() == 1:
        return
    mine = (graph.meta.get("checksum"), socket.gethostname(), str(data_root))
    every: list = [None] * topo.world_size
    dist.all_gather_object(every, mine)
    odd = [r for r, (checksum, _, _) in enumerate(every) if checksum != every[0][0]]
    if odd:
        r = odd[0]
        raise RuntimeError(
            f"rank {r} (host {every[r][1]}, data_root={every[r][2]}) loaded another graph than "
            f"rank 0 (host {every[0][1]}, data_root={every[0][2]}): checksum {every[r][0]} "
            f"against {every[0][0]}; give every host the same processed dataset (copy rank "
            "0's processed folder)")


def attach_footprint(strategy: Strategy, cfg: DictConfig, leader: bool) -> None:
    """``footprint=true``: count input-node visits on a sampling strategy's ranks; strategies
    that use every vertex each epoch have no footprint to compare (a note says so)."""
    if not cfg.get("footprint", False):
        return
    if not isinstance(strategy, SamplingStrategy):
        if leader:
            print(f"footprint=true: {type(strategy).__name__} does not sample mini-batches, "
                  "so there is no footprint similarity to report", flush=True)
        return
    strategy.footprint = Footprint(strategy.ctx.graph.num_nodes)


def strategy_footprint(strategy: Strategy) -> Footprint | None:
    """The strategy's visit counter, None when the metric is off."""
    return getattr(strategy, "footprint", None)


def graph_shape(graph: GraphStore) -> dict[str, Any]:
    """The sizes a comparison or cost model needs (features and classes set the FLOPs); a
    typed graph's adds each node type's nodes and feature width (0: featureless), its number
    of edge types and the edge types ``[src, rel, dst]``."""
    shape: dict[str, Any] = {
        "num_nodes": int(graph.num_nodes), "num_edges": int(graph.num_edges),
        "num_features": int(graph.num_features), "num_classes": int(graph.num_classes),
        "num_train": int(_train_idx(graph).numel())}
    if graph.is_typed:
        shape.update(node_types={t: int(graph.num_nodes_of(t)) for t in graph.node_types},
                     feature_dims=dict(graph.feature_dims), edge_types=len(graph.edge_types),
                     edge_type_list=[list(e) for e in graph.edge_types])
    return shape


def _train_idx(graph: GraphStore) -> torch.Tensor:
    """``graph``'s training vertices (every graph a run trains on has them)."""
    assert graph.train_idx is not None, f"graph {graph.name!r} has no train_idx"
    return graph.train_idx


def _rewrite_metrics(path: Path, history: list[dict]) -> None:
    """``metrics.jsonl`` = one line per epoch of ``history`` (a resume never duplicates one,
    a fresh run in an old folder starts a fresh file)."""
    write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in history))


def _progress(cfg, leader: bool, epoch: int, strategy):
    """Rank 0's bar over the epoch's steps: ``progress=true`` and standard error a terminal."""
    steps = strategy.num_steps(epoch) if leader and cfg.progress and on_a_terminal() else None
    if steps is None:
        return None
    from tqdm import tqdm

    return tqdm(total=steps, desc=f"epoch {epoch}", leave=False, dynamic_ncols=True)


def _save_checkpoint(path: Path, strategy, epoch: int, history: list, cfg, leader: bool):
    rngs = checkpoint.all_rng_states(strategy.group)
    if leader:
        checkpoint.save(path, {
            "model": strategy.module.state_dict(), "optimizer": strategy.optimizer.state_dict(),
            "epoch": epoch, "rng": rngs, "history": history,
            "config": OmegaConf.to_container(cfg),
            "graph": strategy.ctx.graph.meta.get("checksum"),  # resume: the same graph
            "threads": torch.get_num_threads(),  # dist.threads_per_rank=0 resumes with it
        })
    if dist.is_initialized():
        dist.barrier(group=strategy.group)


def _epoch_line(r: dict, task: type[TaskConfig]) -> str:
    acc = "".join(f"  {k} {r[k]:.4f}" for m in task.metrics for k in (f"val_{m}", f"test_{m}")
                  if k in r)
    return (f"epoch {r['epoch']:>3}  loss {r['train_loss']:.4f}{acc}  "
            f"time {r['epoch_time']:.2f}s (sample {r['sample_time']:.2f} load "
            f"{r['load_time']:.2f} compute {r['compute_time']:.2f} comm {r['comm_time']:.2f})")


def _value(option) -> str:
    """An enum option's string (configs may hold the enum or its value)."""
    return getattr(option, "value", option)


def _cores() -> list[int] | None:
    """This process's cores (its affinity mask; None where the platform has none)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _results(history: list[dict], cfg, topo: Topology, task: type[TaskConfig]) -> dict:
    metric = selection_metric(cfg.get("metric", "auto"), history, task.auto_metric)
    evaluated = [h for h in history if f"val_{metric}" in h]
    select = _value(cfg.get("select", "metric"))
    best = selected_record(history, metric, select)
    last = evaluated[-1] if evaluated else {}
    times = sorted(h["epoch_time"] for h in history)
    summary: dict[str, Any] = {"metric": metric, "select": select}
    for m in (k for name in task.metrics for k in reported(name, evaluated)):
        summary.update({f"final_val_{m}": last.get(f"val_{m}"),
                        f"final_test_{m}": last.get(f"test_{m}"),
                        f"best_val_{m}": best.get(f"val_{m}"),
                        f"test_{m}_at_best_val": best.get(f"test_{m}")})
    summary.update({
        "best_val": best.get(f"val_{metric}"), "test_at_best_val": best.get(f"test_{metric}"),
        "best_epoch": best.get("epoch"),
        "median_epoch_time": times[len(times) // 2] if times else None,
        "world_size": topo.world_size,
        # where rank 0 ran: its block of cores when the launcher bound the ranks
        "rank0_cores": _cores(),
    })
    return {"summary": summary, "history": history,
            "config": OmegaConf.to_container(cfg)}
