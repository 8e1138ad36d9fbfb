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


def make_link_model(task: LinkTask, graph: GraphStore, dropout: float = 0.0,
                    model: str = "rgcn"):
    """``_typed_fns``' R-GCN (``model="rgat"``: R-GAT, 2 heads, reading the graph's edge
    features; another name: that model of ``_typed_fns``, ``to_hetero`` a user's SAGE converted
    by PyG's ``to_hetero``) with the task's embedding width and its decoder attached."""
    torch.manual_seed(3)
    if model not in ("rgcn", "rgat"):
        from tests._typed_fns import _typed_model

        out = _typed_model(model, task.out_channels(graph), hidden=8, num_layers=len(FANOUTS),
                           dropout=dropout)
    elif model == "rgat":
        from gnnscale.models.rgat import RGAT

        out = RGAT(0, task.out_channels(graph), hidden=8, num_layers=len(FANOUTS),
                   dropout=dropout, heads=2, edge_dim=int(graph.edge_attr.shape[1]))
    else:
        out = RGCN(0, task.out_channels(graph), hidden=8, num_layers=len(FANOUTS),
                   dropout=dropout, num_bases=2)
    out.bind_graph(graph)
    task.attach(out)
    return out


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


def _book(graph: GraphStore, world: int, cut: str = "edge"):
    """A scattered vertex -> rank map (most pairs and edges cross ranks; on 4 ranks ranks 2
    and 3 own no row of two node types) as an edge cut, or with ``cut="vertex"`` every edge on
    a random rank, the masters from the vertex map."""
    from gnnscale.partition import PartitionBook
    from tests._typed_fns import skew_types

    part = skew_types(graph, (torch.arange(graph.num_nodes) * 7 + 3) % world, world)
    if cut == "vertex":
        edge_part = torch.randint(0, world, (graph.num_edges,),
                                  generator=torch.Generator().manual_seed(5))
        return PartitionBook.from_vertex_cut(graph, part, edge_part, world)
    return PartitionBook.from_edge_cut(graph, part, world)


def typed_link_strategy_steps(topo, kind: str, opts: dict | None = None) -> dict:
    """EPOCHS epochs of strategy ``kind`` (split, fullgraph or offload; ``opts`` its options,
    ``deps``, ``cut``, the ``model`` and its ``dropout`` picked out) on the scattered
    partition: every step's loss and dense gradients as the optimizer saw them (the reduced
    ones), the final parameters and the evaluation's metrics."""
    from gnnscale.deps.depcomm import DepComm
    from gnnscale.partition.provider import FixedPartition
    from gnnscale.strategies.fullgraph.strategy import FullGraph
    from gnnscale.strategies.offload.strategy import Offload
    from gnnscale.strategies.split.strategy import SplitParallel

    opts = dict(opts or {})
    deps = DepCache() if opts.pop("deps", "depcomm") == "depcache" else DepComm()
    task, graph = make_task()
    book = _book(graph, topo.world_size, opts.pop("cut", "edge"))
    model = make_link_model(task, graph, opts.pop("dropout", 0.0), opts.pop("model", "rgcn"))
    ctx = RunContext(topo=topo, graph=graph, model=model,
                     sampler=NeighborSampler(FANOUTS), cache_policy=NoCache(), deps=deps,
                     partition=FixedPartition(book), seed=0, optim=Adam(lr=0.01), task=task)
    if kind == "split":
        strat = SplitParallel(ctx, batch_size=BATCH, prefetch=0, **opts)
    else:
        strat = {"fullgraph": FullGraph, "offload": Offload}[kind](ctx, **opts)
    strat.setup()
    losses, grads = [], []
    step = strat._optimizer.step

    def recorded() -> None:  # the reduced gradients, as the optimizer steps with them
        grads.append(dense_grads(strat.module))
        step()

    strat._optimizer.step = recorded
    for epoch in range(EPOCHS):
        if kind == "split":
            for s in range(strat.num_steps(epoch)):
                losses.append(strat.step(epoch, s))
        else:
            losses.append(strat.train_epoch(epoch)["train_loss"])
    out = {"losses": losses, "grads": grads,
           "params": [p.detach().clone() for p in strat.module.parameters()],
           "metrics": strat.evaluate(64)}
    strat.close()
    return out


def typed_link_split_reference(name: str = "rgcn", dropout: float = 0.0) -> dict:
    """One process over split's schedule: each step the whole mini-batch, sampled once with
    slot 0's seed, its loss over every pair of it (model ``name``; R-GAT reads the blocks'
    edge features, gathered by their edge ids); ``dropout`` keyed as split keys a step."""
    from gnnscale.cache.edges import attach_host
    from gnnscale.strategies.split.strategy import dropout_step_key

    task, graph = make_task()
    model = make_link_model(task, graph, model=name, dropout=dropout)
    opt = Adam(lr=0.01)(model)
    sampler = NeighborSampler(FANOUTS, with_edge_ids=model.reads_edge_features)
    losses, grads = [], []
    for epoch in range(EPOCHS):
        for step, batch in enumerate(epoch_batches(task.train_items(), BATCH, 0, epoch)):
            opt.zero_grad()
            mb = sampler.sample(graph, task.seeds(batch, epoch), sample_seed(0, epoch, step, 0))
            if model.reads_edge_features:
                attach_host(graph, mb.blocks)
            model.set_dropout_key(0, dropout_step_key(epoch, step))
            out = model(typed_inputs(graph, mb.input_nodes), mb.blocks)
            model.set_dropout_key(None)
            _step(task.loss(out, task.target(batch, epoch)), model, opt, losses, grads)
    return _reference_result(task, graph, model, losses, grads)


def _step(loss: torch.Tensor, model, opt, losses: list, grads: list) -> None:
    """Backward, record the step's loss and gradients, step the optimizer."""
    loss.backward()
    losses.append(float(loss.detach()))
    grads.append(dense_grads(model))
    opt.step()


def _reference_result(task, graph, model, losses: list, grads: list) -> dict:
    """A reference's steps, final parameters and evaluation metrics."""
    return {"losses": losses, "grads": grads,
            "params": [p.detach().clone() for p in model.parameters()],
            "metrics": task.evaluate(model, graph, torch.device("cpu"), 64)}


def typed_link_fullgraph_reference(dropout: float = 0.0, name: str = "rgcn") -> dict:
    """One process, every layer on the whole message graph (its blocks carry every edge's
    type and features; model ``name``), then every training pair of the epoch scored: one
    optimizer step per epoch (``dropout``: the model's, keyed by (seed 0, epoch) as the
    full-graph strategies key it)."""
    import torch.nn.functional as F

    from gnnscale.sampling.base import Block

    task, graph = make_task()
    model = make_link_model(task, graph, dropout, name)
    opt = Adam(lr=0.01)(model)
    n = graph.num_nodes
    block = Block(graph.edge_index(), (n, n), torch.arange(n),
                  e_id=torch.arange(graph.num_edges), edge_type=graph.type_per_edge.long(),
                  edge_attr=graph.edge_attr.float())
    x = typed_inputs(graph, torch.arange(n))
    losses, grads = [], []
    for epoch in range(EPOCHS):
        model.train()
        model.set_dropout_key(0, epoch)
        opt.zero_grad()
        z = model(x, [block] * model.num_layers)
        src, dst, label = task.pairs(task.train_items(), epoch)
        _step(F.binary_cross_entropy_with_logits(task.head(z[src], z[dst]), label), model,
              opt, losses, grads)
    return _reference_result(task, graph, model, losses, grads)


def typed_link_strategy_cases(topo, cases: list[tuple[str, dict]]) -> list[dict]:
    """:func:`typed_link_strategy_steps` of each ``(kind, options)`` in turn, on one set of
    ranks (they start once)."""
    return [typed_link_strategy_steps(topo, kind, opts) for kind, opts in cases]
