"""Rank functions for the typed link-prediction tests (module level, so spawn can import
them): task=link on one edge type of ``_typed_fns``' tiny typed graph (with edge features
added), R-GCN under strategy=data, and the one-process reference."""

from __future__ import annotations

import dataclasses

import torch

from gnnscale.cache.none import NoCache
from gnnscale.cache.store import typed_inputs
from gnnscale.data.graph import GraphStore
from gnnscale.deps.depcache import DepCache
from gnnscale.models.rgcn import RGCN
from gnnscale.optim.adam import Adam
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.schedule import epoch_batches, sample_seed
from gnnscale.strategies.base import RunContext
from gnnscale.tasks.link import LinkTask
from tests._typed_fns import FANOUTS, dense_grads, make_typed_graph

BATCH = 24
EPOCHS = 2
EDGE_TYPE = "writes"


def typed_graph_with_edge_attr() -> GraphStore:
    """``_typed_fns``' tiny typed graph with 2-wide edge features on every edge."""
    g = make_typed_graph()
    attr = torch.randn(g.num_edges, 2, generator=torch.Generator().manual_seed(7))
    return dataclasses.replace(g, edge_attr=attr)


def make_task() -> tuple[LinkTask, GraphStore]:
    task = LinkTask(edge_type=EDGE_TYPE, num_negatives=2, decoder="mlp", dim=8,
                    decoder_hidden=8, val_fraction=0.1, test_fraction=0.1, hits_k=[5])
    return task, task.prepare(typed_graph_with_edge_attr(), None, seed=0)


def make_link_model(task: LinkTask, graph: GraphStore) -> RGCN:
    """``_typed_fns``' R-GCN with the task's embedding width and its decoder attached."""
    torch.manual_seed(3)
    model = RGCN(0, task.out_channels(graph), hidden=8, num_layers=len(FANOUTS), dropout=0.0,
                 num_bases=2)
    model.bind_graph(graph)
    task.attach(model)
    return model


def typed_link_data_steps(topo, kind: str = "data") -> dict:
    """EPOCHS epochs of strategy=data (``kind="factored"``: factored, one sampler rank and
    fixed routes, the other ranks training as data does): on a training rank every step's
    loss and gradients (dense), the final parameters and the evaluation's metrics."""
    from gnnscale.strategies.data.strategy import DataParallel
    from gnnscale.strategies.factored.strategy import Factored

    task, graph = make_task()
    ctx = RunContext(topo=topo, graph=graph, model=make_link_model(task, graph),
                     sampler=NeighborSampler(FANOUTS), cache_policy=NoCache(), deps=DepCache(),
                     partition=None, seed=0, optim=Adam(lr=0.01), task=task)
    if kind == "factored":
        strat = Factored(ctx, batch_size=BATCH, samplers="1", queue="routes", queue_depth=1)
    else:
        strat = DataParallel(ctx, batch_size=BATCH, prefetch=0)
    strat.setup()
    losses, grads = [], []
    inner = strat.train_step

    def recorded(*args):
        loss = inner(*args)
        losses.append(loss)
        grads.append(dense_grads(strat.module))
        return loss

    strat.train_step = recorded
    for epoch in range(EPOCHS):
        strat.train_epoch(epoch)
    out = {"reports": bool(strat.reports), "losses": losses, "grads": grads,
           "params": [p.detach().clone() for p in strat.module.parameters()],
           "metrics": strat.evaluate(64) if strat.reports else {}}
    strat.close()
    return out


def typed_link_reference(world_size: int) -> dict:
    """One process over the same schedule: per step the mean of the ``world_size`` micro-batch
    losses, each sampled with its slot's seed (Adam, SparseAdam for the embedding table)."""
    task, graph = make_task()
    model = make_link_model(task, graph)
    opt = Adam(lr=0.01)(model)
    sampler = NeighborSampler(FANOUTS)
    losses, grads = [], []
    for epoch in range(EPOCHS):
        batches = epoch_batches(task.train_items(), BATCH, 0, epoch, min_size=world_size)
        for step, batch in enumerate(batches):
            opt.zero_grad()
            per = []
            for slot, items in enumerate(torch.tensor_split(batch, world_size)):
                mb = sampler.sample(graph, task.seeds(items, epoch),
                                    sample_seed(0, epoch, step, slot))
                out = model(typed_inputs(graph, mb.input_nodes), mb.blocks)
                per.append(task.loss(out, task.target(items, epoch)))
            torch.stack(per).mean().backward()
            losses.append([float(v.detach()) for v in per])
            grads.append(dense_grads(model))
            opt.step()
    return {"losses": losses, "grads": grads,
            "params": [p.detach().clone() for p in model.parameters()],
            "metrics": task.evaluate(model, graph, torch.device("cpu"), 64)}
