"""What every rank runs: build components, train, evaluate, checkpoint, report."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from omegaconf import OmegaConf

from gnnscale import registry
from gnnscale.distributed.launch import Topology
from gnnscale.executor.base import RunContext
from gnnscale.runner import checkpoint
from gnnscale.runner.evaluate import evaluate
from gnnscale.runner.metrics import MetricsWriter, peak_memory, reduce_over_ranks, summary_table
from gnnscale.runner.validate import check_data


def _partition_fn(graph, cfg, topo: Topology) -> Any:
    """``partition(num_parts)``: rank 0 computes (or loads) the book, then the others load it."""
    books: dict[int, Any] = {}

    def partition(num_parts: int):
        from gnnscale.partition import get_partition

        if num_parts not in books:
            root = Path(cfg.data_root) / "partitions"
            quiet = (lambda *_: None) if topo.rank else print
            if topo.rank == 0:
                books[num_parts] = get_partition(graph, cfg.partitioner, num_parts,
                                                 cache_root=root, log=quiet)
            if dist.is_initialized():
                dist.barrier()
            if topo.rank != 0:
                books[num_parts] = get_partition(graph, cfg.partitioner, num_parts,
                                                 cache_root=root, log=quiet)
        return books[num_parts]

    return partition


def build_context(topo: Topology, cfg) -> RunContext:
    """Every component from its own sub-config plus the runtime objects it needs."""
    registry.load_all()
    graph = registry.build(cfg.dataset).load()
    check_data(cfg, graph, topo.world_size)
    torch.manual_seed(cfg.seed)  # identical initial parameters on every rank
    model = registry.build(cfg.model, in_channels=graph.num_features,
                           out_channels=graph.num_classes)
    model.bind_graph(graph)
    return RunContext(
        topo=topo, graph=graph, model=model, sampler=registry.build(cfg.sampler),
        cache_policy=registry.build(cfg.cache), deps=registry.build(cfg.deps),
        partition=_partition_fn(graph, cfg, topo), seed=cfg.seed, batch_size=cfg.batch_size,
        lr=cfg.lr, weight_decay=cfg.weight_decay,
    )


def rank_main(topo: Topology, cfg_dict: dict, run_dir: str) -> dict | None:
    """Train on this rank; rank 0 returns the results, the others None."""
    cfg = OmegaConf.create(cfg_dict)
    leader = topo.rank == 0
    ctx = build_context(topo, cfg)
    strategy = registry.build(cfg.strategy, ctx=ctx)
    strategy.setup()
    ckpt_path = Path(run_dir) / checkpoint.FILENAME
    history: list[dict] = []
    start = 0
    if cfg.resume and ckpt_path.exists():
        state = checkpoint.load(ckpt_path)
        strategy.module.load_state_dict(state["model"])
        strategy.optimizer.load_state_dict(state["optimizer"])
        checkpoint.set_rng_state(state["rng"][topo.rank])
        history, start = state["history"], state["epoch"] + 1
        if leader:
            print(f"resumed from {ckpt_path} after epoch {state['epoch']}", flush=True)
    logger = registry.build(cfg.logger) if leader else None
    writer = MetricsWriter(run_dir) if leader else None
    if leader:
        logger.start(OmegaConf.to_container(cfg), run_dir)
        print(ctx.graph.summary(), flush=True)
    try:
        for epoch in range(start, cfg.epochs):
            bar = _progress(cfg, leader, epoch, strategy)
            local = strategy.train_epoch(epoch, bar)
            if bar is not None:
                bar.close()
            local["peak_memory"] = peak_memory(topo.device)
            record = {"epoch": epoch, **reduce_over_ranks(local)}
            last = epoch == cfg.epochs - 1
            if last or (cfg.eval_every and (epoch + 1) % cfg.eval_every == 0):
                t0 = time.perf_counter()
                record.update(evaluate(strategy.module, ctx.graph, topo, cfg.eval_batch_size))
                record["eval_time"] = time.perf_counter() - t0
            history.append(record)
            if leader:
                writer.write(record)
                logger.log_epoch(epoch, record)
                print(_epoch_line(record), flush=True)
            if cfg.checkpoint:
                _save_checkpoint(ckpt_path, strategy, epoch, history, cfg, leader)
    finally:
        strategy.close()
    if not leader:
        return None
    results = _results(history, cfg, topo)
    (Path(run_dir) / "results.json").write_text(json.dumps(results, indent=1))
    logger.finish(results["summary"])
    print("\n" + summary_table(history), flush=True)
    print(f"\nresults: {os.path.join(run_dir, 'results.json')}", flush=True)
    return results


def _progress(cfg, leader: bool, epoch: int, strategy):
    if not (leader and cfg.progress) or not hasattr(strategy, "num_steps"):
        return None
    from tqdm import tqdm

    return tqdm(total=strategy.num_steps(epoch), desc=f"epoch {epoch}", leave=False,
                dynamic_ncols=True)


def _save_checkpoint(path: Path, strategy, epoch: int, history: list, cfg, leader: bool):
    rngs = checkpoint.all_rng_states()
    if leader:
        checkpoint.save(path, {
            "model": strategy.module.state_dict(), "optimizer": strategy.optimizer.state_dict(),
            "epoch": epoch, "rng": rngs, "history": history,
            "config": OmegaConf.to_container(cfg),
        })
    if dist.is_initialized():
        dist.barrier()


def _epoch_line(r: dict) -> str:
    acc = "".join(f"  {k} {r[k]:.4f}" for k in ("val_acc", "test_acc") if k in r)
    return (f"epoch {r['epoch']:>3}  loss {r['train_loss']:.4f}{acc}  "
            f"time {r['epoch_time']:.2f}s (sample {r['sample_time']:.2f} load "
            f"{r['load_time']:.2f} compute {r['compute_time']:.2f} comm {r['comm_time']:.2f})")


def _results(history: list[dict], cfg, topo: Topology) -> dict:
    evaluated = [h for h in history if "val_acc" in h]
    best = max(evaluated, key=lambda h: h["val_acc"]) if evaluated else {}
    times = sorted(h["epoch_time"] for h in history)
    summary = {
        "final_val_acc": evaluated[-1].get("val_acc") if evaluated else None,
        "final_test_acc": evaluated[-1].get("test_acc") if evaluated else None,
        "best_val_acc": best.get("val_acc"),
        "test_acc_at_best_val": best.get("test_acc"),
        "median_epoch_time": times[len(times) // 2] if times else None,
        "world_size": topo.world_size,
    }
    return {"summary": summary, "history": history,
            "config": OmegaConf.to_container(cfg)}
