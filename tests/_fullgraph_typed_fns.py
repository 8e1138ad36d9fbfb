"""Rank functions for the full-graph tests on typed graphs and edge features (module level, so
spawn can import them): ``strategy=fullgraph`` itself (plan, encode, sparse reduce) with R-GCN
on the tiny typed graph of tests/_typed_fns.py, and GAT and GINE with edge features, each
against one process training on the whole graph."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gnnscale.cache.none import NoCache
from gnnscale.cache.store import typed_inputs
from gnnscale.data.graph import GraphStore
from gnnscale.deps.depcache import DepCache
from gnnscale.deps.depcomm import DepComm
from gnnscale.deps.hybrid import Hybrid
from gnnscale.optim.adam import Adam
from gnnscale.partition import PartitionBook
from gnnscale.partition.provider import FixedPartition
from gnnscale.sampling.base import Block
from gnnscale.strategies.base import RunContext
from gnnscale.strategies.fullgraph.strategy import FullGraph
from tests import _data_fns, _typed_fns

EPOCHS = 3
SEED = 9
#: hybrid with recomputation free and a tiny budget: a mix of replicated and sent rows
CAPPED = {"costs": {"t_vertex": 0.0, "t_edge": 0.0, "t_comm": 1.0}, "memory_cap_mb": 1 / 1024,
          "margin": 0.0}


def make_typed_graph() -> GraphStore:
    return _typed_fns.make_typed_graph()


def make_typed_model(graph: GraphStore):
    """R-GCN with keyed dropout on, so a replica's row equals its owner's only if keyed."""
    torch.manual_seed(3)
    from gnnscale.models.rgcn import RGCN

    model = RGCN(0, graph.num_classes, hidden=8, num_layers=2, dropout=0.5, num_bases=2)
    model.bind_graph(graph)
    return model


def make_edge_graph() -> GraphStore:
    return _data_fns.graph_for("gat_edge")


def make_edge_model(graph: GraphStore):
    """GAT reading edge features (``edge_dim``); ``gine`` below: GINE."""
    return _data_fns.make_model(graph, "gat_edge")


def other_typed_model(name: str):
    """The builder of typed model ``name`` (hsage, hgat, hgt) with keyed dropout on."""
    def make(graph: GraphStore):
        torch.manual_seed(3)
        model = _typed_fns._typed_model(name, graph.num_classes, hidden=8, num_layers=2,
                                        dropout=0.5)
        model.bind_graph(graph)
        return model
    return make


def make_rgat(graph: GraphStore):
    """R-GAT reading the typed graph's edge features, with keyed dropout on."""
    from gnnscale.models.rgat import RGAT

    torch.manual_seed(3)
    model = RGAT(0, graph.num_classes, hidden=8, num_layers=2, dropout=0.5, heads=2,
                 edge_dim=int(graph.edge_attr.shape[1]))
    model.bind_graph(graph)
    return model


GRAPHS = {"rgcn": (make_typed_graph, make_typed_model),
          "rgat": (lambda: _typed_fns.make_typed_graph(edge_features=True), make_rgat),
          **{m: (make_typed_graph, other_typed_model(m))
             for m in ("hsage", "hgat", "hgt", *_typed_fns.USER)},
          "gat_edge": (make_edge_graph, make_edge_model),
          "gine": (make_edge_graph, lambda graph: _data_fns.make_model(graph, "gine")),
          # users' models traced into stages (tests/_user_models.py TRACED_EDGES)
          **{f"user_{m}": (make_edge_graph,
                           lambda graph, m=m: _data_fns.make_model(graph, f"user_{m}"))
             for m in ("t_transformer_e", "t_gine", "t_gatv2e")}}


def part_of(graph: GraphStore, world: int) -> torch.Tensor:
    """A random vertex -> part map (cuts many edges, and every part holds every type)."""
    return torch.randint(0, world, (graph.num_nodes,),
                         generator=torch.Generator().manual_seed(4))


def _deps(name: str):
    return {"depcache": DepCache, "depcomm": DepComm,
            "hybrid": lambda: Hybrid(**CAPPED)}[name]()


def dense_grads(model: torch.nn.Module) -> list[torch.Tensor]:
    return _typed_fns.dense_grads(model)


def strategy_epochs(topo, cases: list[tuple[str, str, dict]]) -> list[dict]:
    """Per case ``(model, deps, strategy options)``: EPOCHS epochs of strategy=fullgraph on
    this rank (on 4 ranks of the typed graph ranks 2 and 3 own no row of two of its types);
    every epoch's loss and reduced gradients (embedding tables' dense), the final parameters
    and the last epoch's metrics."""
    out = []
    for model_name, deps_name, opts in cases:
        make_graph, make_model = GRAPHS[model_name]
        graph = make_graph()
        part = _typed_fns.skew_types(graph, part_of(graph, topo.world_size), topo.world_size)
        if opts.get("vertex_cut"):  # each edge on a random part, masters from the vertex map
            opts = {k: v for k, v in opts.items() if k != "vertex_cut"}
            edge_part = torch.randint(0, topo.world_size, (graph.num_edges,),
                                      generator=torch.Generator().manual_seed(5))
            book = PartitionBook.from_vertex_cut(graph, part, edge_part, topo.world_size)
        else:
            book = PartitionBook.from_edge_cut(graph, part, topo.world_size)
        ctx = RunContext(topo=topo, graph=graph, model=make_model(graph), sampler=None,
                         cache_policy=NoCache(), deps=_deps(deps_name),
                         partition=FixedPartition(book), optim=Adam(lr=0.01), seed=SEED)
        strat = FullGraph(ctx, **opts)
        strat.setup()
        grads: list[list[torch.Tensor]] = []
        step = strat._optimizer.step

        def recorded(strat=strat, step=step, grads=grads):  # the reduced gradients
            grads.append(dense_grads(strat.module))
            step()

        strat._optimizer.step = recorded
        metrics = [strat.train_epoch(e) for e in range(EPOCHS)]
        out.append({"losses": [m["train_loss"] for m in metrics], "grads": grads,
                    "params": [p.detach().clone() for p in strat.module.parameters()],
                    "metrics": metrics[-1]})
    return out


def reference(model_name: str) -> dict:
    """One process, the whole graph, every layer on every vertex: the same per-epoch figures
    (the same optimizer factory: Adam, and SparseAdam for the embedding tables)."""
    make_graph, make_model = GRAPHS[model_name]
    graph = make_graph()
    model = make_model(graph)
    opt = Adam(lr=0.01)(model)
    n, e = graph.num_nodes, graph.num_edges
    block = Block(graph.edge_index(), (n, n), torch.arange(n), e_id=torch.arange(e))
    if graph.type_per_edge is not None:
        block.edge_type = graph.type_per_edge.long()
    if graph.edge_attr is not None:
        block.edge_attr = graph.edge_attr.float()
    x = typed_inputs(graph, torch.arange(n)) if graph.is_typed else graph.x
    train = graph.train_idx
    losses, grads = [], []
    for epoch in range(EPOCHS):
        model.train()
        model.set_dropout_key(SEED, epoch)
        opt.zero_grad()
        out = model(x, [block] * model.num_layers)
        loss = F.cross_entropy(out[train], graph.y[train], reduction="sum") / train.numel()
        loss.backward()
        losses.append(float(loss.detach()))
        grads.append(dense_grads(model))
        opt.step()
    return {"losses": losses, "grads": grads,
            "params": [p.detach().clone() for p in model.parameters()]}
