"""Rank functions for the full-graph tests (module level, so spawn can import them).

A case is ``(model, deps, options)``; every case runs three full-graph Adam epochs on a tiny
graph and returns the first epoch's loss and summed gradients, the final parameters and the
plan's figures, to compare with one process training on the whole graph.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from gnnscale.data.graph import GraphStore
from gnnscale.deps.depcache import DepCache
from gnnscale.deps.depcomm import DepComm
from gnnscale.deps.hybrid import Hybrid
from gnnscale.models.gat import GAT
from gnnscale.models.gcn import GCN
from gnnscale.models.gin import GIN
from gnnscale.models.sage import SAGE
from gnnscale.sampling.base import Block
from gnnscale.strategies.fullgraph.edge_cut import EdgeCutPlan
from tests import _user_models

EPOCHS = 3
DROPOUT_SEED = 9
LAYERS = 3
MODELS = ("sage", "gcn", "gin", "gat")
REPLICATE = {"t_vertex": 0.0, "t_edge": 0.0, "t_comm": 1.0}  # recomputing is free
COMMUNICATE = {"t_vertex": 1.0, "t_edge": 1.0, "t_comm": 0.0}  # sending is free


def make_graph(n: int = 120, e: int = 260, f: int = 6, c: int = 3) -> GraphStore:
    g = torch.Generator().manual_seed(11)
    ei = torch.randint(0, n, (2, e), generator=g)
    perm = torch.randperm(n, generator=g)
    return GraphStore.from_edge_index(
        ei, n, symmetrize=True, self_loops="remove", x=torch.randn(n, f, generator=g),
        y=torch.randint(0, c, (n,), generator=g), num_classes=c,
        train_idx=perm[: n // 2].sort().values, val_idx=perm[n // 2: 3 * n // 4],
        test_idx=perm[3 * n // 4:],
    )


def make_model(name: str, graph: GraphStore, dropout: float = 0.5):
    """Dropout on: masks keyed by (seed, epoch, layer, vertex) agree between replicas.
    ``<name>_res``: the residual stack (model.residual, layer norm, GELU); ``user_<key>``: a
    user's own model of tests/_user_models.py (model=custom)."""
    torch.manual_seed(5)
    if name.startswith("user_"):  # a user's own model (model=custom), tests/_user_models.py
        model = _user_models.wrap(name, graph.num_features, graph.num_classes, LAYERS,
                                  dropout=dropout, input_dropout=dropout / 2, graph=graph)
        model.bind_graph(graph)  # a traced GCNConv's degrees (as build_model binds them)
        return model
    kw = dict(hidden=8, num_layers=LAYERS, dropout=dropout, input_dropout=dropout / 2)
    if name.endswith("_res"):
        name = name[: -len("_res")]
        kw.update(residual=True, norm="layer", activation="gelu")
    if name == "sage":
        return SAGE(graph.num_features, graph.num_classes, **kw)
    if name == "gcn":
        model = GCN(graph.num_features, graph.num_classes, gcn_norm="graph", **kw)
        model.bind_graph(graph)
        return model
    if name == "gin":
        return GIN(graph.num_features, graph.num_classes, **kw)
    return GAT(graph.num_features, graph.num_classes, heads=2, **kw)


def make_deps(name: str):
    """depcache, depcomm, hybrid (probed), hybrid forced either way, or forced with a cap."""
    if name == "depcache":
        return DepCache()
    if name == "depcomm":
        return DepComm()
    # forced plans: margin 0, so the guard keeps the greedy's plan unless a fixed one is
    # predicted strictly cheaper
    if name == "hybrid_replicate":
        return Hybrid(costs=REPLICATE, margin=0.0)
    if name == "hybrid_communicate":
        return Hybrid(costs=COMMUNICATE, margin=0.0)
    if name == "hybrid_capped":  # replicate what fits in 1.5 KiB, communicate the rest
        return Hybrid(costs=REPLICATE, memory_cap_mb=1.5 / 1024, margin=0.0)
    return Hybrid()


def _train(graph: GraphStore, model, forward, masters: torch.Tensor, world: int) -> dict:
    """EPOCHS full-graph Adam epochs; the first epoch's loss and (summed) gradients."""
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    is_train = torch.zeros(graph.num_nodes, dtype=torch.bool)
    is_train[graph.train_idx] = True
    mine = is_train[masters]
    first = None
    for epoch in range(EPOCHS):
        model.set_dropout_key(DROPOUT_SEED, epoch)
        opt.zero_grad()
        out = forward()
        loss = F.cross_entropy(out[mine], graph.y[masters[mine]], reduction="sum") \
            / graph.train_idx.numel()
        loss.backward()
        total = loss.detach().clone()
        if world > 1:
            for p in model.parameters():
                dist.all_reduce(p.grad)
            dist.all_reduce(total)
        if first is None:
            first = {"loss": float(total), "grads": [p.grad.clone() for p in model.parameters()]}
        opt.step()
    first["params"] = [p.detach().clone() for p in model.parameters()]
    return first


def reference(model_name: str) -> dict:
    """One process, the whole graph, every layer on every vertex."""
    graph = make_graph()
    model = make_model(model_name, graph)
    n = graph.num_nodes
    block = Block(graph.edge_index(), (n, n), torch.arange(n))
    return _train(graph, model, lambda: model(graph.x, [block] * LAYERS), torch.arange(n), 1)


def edge_cut_cases(topo, part: torch.Tensor, cases: list[tuple[str, str, dict]]) -> list[dict]:
    """Run every case on this rank; per case its results and plan figures."""
    results = []
    for model_name, deps_name, opts in cases:
        graph = make_graph()
        model = make_model(model_name, graph)
        plan = EdgeCutPlan(graph, part, topo.rank, topo.world_size, make_deps(deps_name),
                           model.widths(graph.num_features), **opts)
        res = _train(graph, model, lambda p=plan, m=model: p.forward(m), plan.masters,
                     topo.world_size)
        res["stats"] = plan.stats()
        res["layers"] = plan.layout.report["layers"]
        res["rows"] = [r.clone() for r in plan.layout.rows]
        res["masters"] = plan.masters.clone()
        results.append(res)
    return results


def _strategy(topo, book):
    from gnnscale.cache.none import NoCache
    from gnnscale.deps.depcomm import DepComm
    from gnnscale.distributed.topology import Topology
    from gnnscale.optim.adam import Adam
    from gnnscale.partition.provider import FixedPartition
    from gnnscale.strategies.base import RunContext
    from gnnscale.strategies.fullgraph.strategy import FullGraph

    graph = make_graph()
    if topo is None:
        topo = Topology(rank=0, world_size=1, local_rank=0, local_world_size=1,
                        device=torch.device("cpu"))
    ctx = RunContext(topo=topo, graph=graph, model=make_model("gcn", graph), sampler=None,
                     cache_policy=NoCache(), deps=DepComm(),
                     partition=FixedPartition(book) if book is not None else None,
                     optim=Adam(lr=0.01), seed=DROPOUT_SEED)
    strat = FullGraph(ctx)
    strat.setup()
    return strat


def setup_with_book(topo, parts: int) -> None:
    """Set up the strategy with a book of ``parts`` parts (refused unless it is the world)."""
    from gnnscale.partition import PartitionBook

    graph = make_graph()
    book = PartitionBook.from_edge_cut(graph, torch.arange(graph.num_nodes) % parts, parts)
    _strategy(topo, book)


def strategy_epochs(topo, world: int) -> dict:
    """EPOCHS epochs of strategy=fullgraph; the first loss and the final parameters."""
    strat = _strategy(topo, None)
    losses = [strat.train_epoch(e)["train_loss"] for e in range(EPOCHS)]
    return {"loss": losses[0], "params": [p.detach().clone() for p in strat.module.parameters()]}
