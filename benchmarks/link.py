"""Suite ``link``: link-training throughput, positive edges per second, one process.

Workload (default / ``--quick``): the sampler suite's products-like graph (``products_sim``
statistics at 1/100 / 1/400 of ogbn-products: ~24.5k / ~6.1k nodes, mean degree ~50), 32
random features, a random 85/5/10 edge split, GraphSAGE 2 layers hidden 64 into 64-wide
embeddings, the dot decoder, one uniform negative per positive (edges rejected). ``data``
trains mini-batches of 4096 positives with fanouts 10,5 (the seeds are every endpoint of the
positives and their negatives); ``fullgraph`` computes every node's embedding once per epoch
and scores every training pair. Both run side by side on the same graph and task, epochs
alternated; figures are medians over the epochs after the first (warm-up). Node
classification under ``data`` with the same model, fanouts and number of seeds per step gives
the cost of the seeds alone (``node_seeds_per_s``), for reference.
"""

from __future__ import annotations

import statistics
import time

import torch

from benchmarks import ratio
from benchmarks.sampler import PRODUCTS_LIKE
from gnnscale.cache.none import NoCache
from gnnscale.data.synthetic import generate
from gnnscale.deps.depcomm import DepComm
from gnnscale.distributed.topology import Topology
from gnnscale.models.sage import SAGE
from gnnscale.optim.adam import Adam
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.strategies.base import RunContext
from gnnscale.tasks.link import LinkTask
from gnnscale.tasks.node import NodeTask

FANOUTS = [10, 5]
BATCH = 4096
CPU = Topology(0, 1, 0, 1, torch.device("cpu"))


def _strategy(kind: str, graph, task):
    from gnnscale.strategies.data.strategy import DataParallel
    from gnnscale.strategies.fullgraph.strategy import FullGraph

    torch.manual_seed(0)
    model = SAGE(graph.num_features, task.out_channels(graph), hidden=64,
                 num_layers=len(FANOUTS), dropout=0.0)
    task.attach(model)
    ctx = RunContext(topo=CPU, graph=graph, model=model, sampler=NeighborSampler(FANOUTS),
                     cache_policy=NoCache(), deps=DepComm(), partition=None,
                     optim=Adam(lr=0.01), seed=0, task=task)
    strat = DataParallel(ctx, batch_size=BATCH, prefetch=1) if kind != "fullgraph" \
        else FullGraph(ctx)
    strat.setup()
    return strat


def run(quick: bool) -> dict:
    scale, epochs = (0.0025, 4) if quick else (0.01, 5)
    graph = generate(scale=scale, seed=0, **{**PRODUCTS_LIKE, "num_features": 32})
    link = LinkTask(dim=64, num_negatives=1)
    message = link.prepare(graph, None, seed=0)
    positives = int(link.train_items().numel())
    node = NodeTask()
    node_graph = node.prepare(message)
    strategies = {"data": _strategy("data", message, link),
                  "fullgraph": _strategy("fullgraph", message, link),
                  "node_data": _strategy("data", node_graph, node)}
    times: dict[str, list[float]] = {k: [] for k in strategies}
    seeds = {}
    for epoch in range(epochs):
        for name, strat in strategies.items():
            t0 = time.perf_counter()
            strat.train_epoch(epoch)
            times[name].append(time.perf_counter() - t0)
    batch = link.train_items()[:BATCH]
    seeds["link_per_step"] = int(link.seeds(batch, 0).numel())
    for strat in strategies.values():
        strat.close()
    median = {k: statistics.median(v[1:]) for k, v in times.items()}
    node_seeds = node_graph.train_idx.numel()
    results = {
        "positive_edges_per_s": {"data": positives / median["data"],
                                 "fullgraph": positives / median["fullgraph"]},
        "epoch_seconds": median,
        "node_seeds_per_s": node_seeds / median["node_data"],
        "link_seeds_per_step": seeds["link_per_step"],
    }
    return {
        "config": {"num_nodes": graph.num_nodes, "num_edges": graph.num_edges,
                   "message_edges": message.num_edges, "train_positives": positives,
                   "fanouts": FANOUTS, "batch_size": BATCH, "epochs": epochs,
                   "graph": PRODUCTS_LIKE | {"scale": scale, "num_features": 32},
                   "node_train_vertices": int(node_seeds)},
        "results": results,
        "ratios": {"fullgraph_over_data": ratio(results["positive_edges_per_s"]["fullgraph"],
                                                results["positive_edges_per_s"]["data"])},
    }
