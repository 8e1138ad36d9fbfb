"""Rank functions for the data-parallel tests (module level, so spawn can import them)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gnnscale.cache.none import NoCache
from gnnscale.data.graph import GraphStore
from gnnscale.deps.depcache import DepCache
from gnnscale.models.sage import SAGE
from gnnscale.optim.adam import Adam
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.schedule import epoch_batches, sample_seed
from gnnscale.strategies.base import RunContext
from gnnscale.strategies.data.strategy import DataParallel

FANOUTS = [4, 3]
BATCH = 48
STEPS = 3


#: models that read edge features: make_graph(edge_dim=EDGE_DIM) gives them a graph that has
EDGE_MODELS = ("gat_edge", "gine", "user_gatv2edge", "user_t_transformer_e", "user_t_gine",
               "user_t_gatv2e")
EDGE_DIM = 3


def make_graph(n: int = 300, e: int = 1500, f: int = 12, c: int = 4,
               edge_dim: int = 0) -> GraphStore:
    """A random symmetric graph; ``edge_dim`` > 0: with edge features that wide (drawn after
    everything else, so the rest is the same graph)."""
    g = torch.Generator().manual_seed(7)
    ei = torch.randint(0, n, (2, e), generator=g)
    x, y = torch.randn(n, f, generator=g), torch.randint(0, c, (n,), generator=g)
    attr = torch.randn(e, edge_dim, generator=g) if edge_dim else None
    return GraphStore.from_edge_index(
        ei, n, symmetrize=True, self_loops="remove", x=x, y=y, num_classes=c, edge_attr=attr,
        train_idx=torch.arange(0, 200), val_idx=torch.arange(200, 250),
        test_idx=torch.arange(250, 300),
    )


def graph_for(model: str) -> GraphStore:
    """:func:`make_graph`, with edge features for a model of :data:`EDGE_MODELS`."""
    return make_graph(edge_dim=EDGE_DIM if model in EDGE_MODELS else 0)


def make_model(graph: GraphStore, name: str = "sage") -> torch.nn.Module:
    """SAGE, ``gat_edge`` / ``gine`` (built-ins reading edge features), or ``user_<key>``: a
    user's own model of tests/_user_models.py (model=custom)."""
    torch.manual_seed(3)
    if name.startswith("user_"):
        from tests import _user_models

        model = _user_models.wrap(name, graph.num_features, graph.num_classes, len(FANOUTS),
                                  edge_dim=EDGE_DIM if name in EDGE_MODELS else None,
                                  graph=graph)
        model.bind_graph(graph)  # a traced GCNConv's degrees (as build_model binds them)
        return model
    if name == "gat_edge":
        from gnnscale.models.gat import GAT

        return GAT(graph.num_features, graph.num_classes, heads=2, hidden=8,
                   num_layers=len(FANOUTS), dropout=0.0, edge_dim=EDGE_DIM)
    if name == "gine":
        from gnnscale.models.gine import GINE

        return GINE(graph.num_features, graph.num_classes, edge_dim=EDGE_DIM, hidden=16,
                    num_layers=len(FANOUTS), dropout=0.0)
    return SAGE(graph.num_features, graph.num_classes, hidden=16, num_layers=len(FANOUTS),
                dropout=0.0)


def data_parallel_steps(topo) -> dict:
    """Run STEPS steps of strategy=data; return every step's gradients and the final params."""
    graph = make_graph()
    ctx = RunContext(topo=topo, graph=graph, model=make_model(graph),
                     sampler=NeighborSampler(FANOUTS), cache_policy=NoCache(), deps=DepCache(),
                     partition=None, seed=0, optim=Adam(lr=0.01))
    strat = DataParallel(ctx, batch_size=BATCH, prefetch=0)
    strat.setup()
    grads, losses = [], []
    for step in range(STEPS):
        mb = strat.sample(strat.schedule.draw(0, step, strat.slot))
        x = strat.store.gather(mb.input_nodes)
        losses.append(strat.train_step(mb, x, graph.y[mb.targets]))
        grads.append([p.grad.clone() for p in strat.module.parameters()])
    params = [p.detach().clone() for p in strat.module.parameters()]
    return {"grads": grads, "params": params, "losses": losses}


def reference_steps(world_size: int) -> dict:
    """One process: per step, the mean of the world_size micro-batch losses."""
    graph = make_graph()
    model = make_model(graph)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sampler = NeighborSampler(FANOUTS)
    batches = epoch_batches(graph.train_idx, BATCH, 0, 0, min_size=world_size)
    grads, losses = [], []
    for step in range(STEPS):
        opt.zero_grad()
        micro = torch.tensor_split(batches[step], world_size)
        per_rank = []
        for rank, targets in enumerate(micro):
            mb = sampler.sample(graph, targets, sample_seed(0, 0, step, rank))
            out = model(graph.x[mb.input_nodes], mb.blocks)
            per_rank.append(F.cross_entropy(out, graph.y[mb.targets]))
        loss = torch.stack(per_rank).mean()
        loss.backward()
        grads.append([p.grad.clone() for p in model.parameters()])
        losses.append([float(v.detach()) for v in per_rank])
        opt.step()
    return {"grads": grads, "params": [p.detach().clone() for p in model.parameters()],
            "losses": losses}
