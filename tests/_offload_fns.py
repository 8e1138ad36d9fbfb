"""Rank functions for the offload tests (module level, so spawn can import them).

A case is ``(model, options)``: one offloaded epoch of the full-graph loss on the tiny graph of
the full-graph tests; it returns the loss, the summed gradients and the transfer figures, to
compare with one process training on the whole graph and with ``fullgraph`` + depcomm.
"""

from __future__ import annotations

import torch

from gnnscale.cache.none import NoCache
from gnnscale.deps.depcomm import DepComm
from gnnscale.distributed.topology import Topology
from gnnscale.optim.adam import Adam
from gnnscale.partition import PartitionBook
from gnnscale.partition.provider import FixedPartition
from gnnscale.strategies.base import RunContext
from gnnscale.strategies.offload.strategy import Offload
from tests import _fullgraph_fns as F


def make_strategy(topo, part: torch.Tensor | None, model_name: str,
                  modes: tuple[str, ...] | None = None, **opts) -> Offload:
    """``modes``: per layer a string of ``c``/``r``, one per batch, set as the rule sets them
    (with ``intermediate=auto``, whose set-up keeps room for the aggregates)."""
    graph = F.make_graph()
    if topo is None:
        topo = Topology(rank=0, world_size=1, local_rank=0, local_world_size=1,
                        device=torch.device("cpu"))
    provider = None
    if part is not None:
        provider = FixedPartition(PartitionBook.from_edge_cut(graph, part, topo.world_size))
    ctx = RunContext(topo=topo, graph=graph, model=F.make_model(model_name, graph), sampler=None,
                     cache_policy=NoCache(), deps=DepComm(), partition=provider,
                     optim=Adam(lr=0.01), seed=F.DROPOUT_SEED)
    strat = Offload(ctx, **opts)
    strat.setup()
    if modes is not None:
        strat.modes = [[{"c": "cache", "r": "recompute"}[x] for x in p] for p in modes]
    return strat


def one_epoch(strat: Offload) -> dict:
    """The first epoch's loss and summed gradients (the step leaves them in ``.grad``)."""
    m = strat.train_epoch(0)
    m["grads"] = [p.grad.clone() for p in strat.module.parameters()]
    m["planned_rows"] = strat.planned_rows_loaded()
    m["per_pass_rows"] = sum(t.rows_loaded for t in strat.transfers)
    m["modes"] = [list(x) for x in strat.modes]
    return m


def offload_cases(topo, part: torch.Tensor, cases: list[tuple[str, dict]]) -> list[dict]:
    return [one_epoch(make_strategy(topo, part, name, **opts)) for name, opts in cases]


def depcomm_grads(topo, part: torch.Tensor, models: tuple[str, ...]) -> dict[str, dict]:
    """``fullgraph`` + depcomm on the same book: per model the first epoch's loss and
    gradients."""
    from gnnscale.strategies.fullgraph.edge_cut import EdgeCutPlan

    out = {}
    for name in models:
        graph = F.make_graph()
        model = F.make_model(name, graph)
        plan = EdgeCutPlan(graph, part, topo.rank, topo.world_size, DepComm(),
                           model.widths(graph.num_features))
        out[name] = F._train(graph, model, lambda p=plan, m=model: p.forward(m), plan.masters,
                             topo.world_size)
    return out


# -- typed graphs and edge features ----------------------------------------------------------
#: models of the typed / edge-feature cases: R-GCN on the tiny typed graph (a featureless
#: type's sparse embedding table, per-type widths), GAT with edge_dim and GINE on a graph with
#: edge features
TYPED_EPOCHS = 3
EDGE_DIM = 3


def case_graph(name: str):
    """The tiny typed graph (a typed model: ``rgcn``, ``hsage``, ...), else the full-graph
    tests' graph with edge features."""
    from gnnscale.data.graph import GraphStore
    from tests import _typed_fns

    if name in (*_typed_fns.MODELS, *_typed_fns.USER, "rgat"):  # R-GAT: edge features
        return _typed_fns.make_typed_graph(edge_features=name == "rgat")
    g = torch.Generator().manual_seed(11)
    n = 120
    ei = torch.randint(0, n, (2, 260), generator=g)
    perm = torch.randperm(n, generator=g)
    return GraphStore.from_edge_index(
        ei, n, symmetrize=True, self_loops="remove", x=torch.randn(n, 6, generator=g),
        y=torch.randint(0, 3, (n,), generator=g), num_classes=3,
        edge_attr=torch.randn(260, EDGE_DIM, generator=g),
        train_idx=perm[: n // 2].sort().values, val_idx=perm[n // 2: 3 * n // 4],
        test_idx=perm[3 * n // 4:])


def case_model(name: str, graph):
    """Dropout on (keyed masks agree between replicas)."""
    torch.manual_seed(5)
    kw = dict(hidden=8, num_layers=2, dropout=0.5, input_dropout=0.25)
    from tests import _typed_fns

    if name in (*_typed_fns.MODELS, *_typed_fns.USER):  # R-GCN (2 bases), another typed
        model = _typed_fns._typed_model(name, graph.num_classes, **kw)
        model.bind_graph(graph)
        return model
    if name == "rgat":
        from gnnscale.models.rgat import RGAT

        model = RGAT(0, graph.num_classes, heads=2, edge_dim=int(graph.edge_attr.shape[1]),
                     **kw)
        model.bind_graph(graph)
        return model
    if name.startswith("user_"):  # a user's model traced into stages (its own dropout)
        from tests import _user_models

        model = _user_models.wrap(name, graph.num_features, graph.num_classes, 2,
                                  dropout=0.5, input_dropout=0.25, edge_dim=EDGE_DIM,
                                  graph=graph)
        model.bind_graph(graph)
        return model
    if name == "gine":
        from gnnscale.models.gine import GINE

        return GINE(graph.num_features, graph.num_classes, edge_dim=EDGE_DIM, **kw)
    from gnnscale.models.gat import GAT

    return GAT(graph.num_features, graph.num_classes, heads=2, edge_dim=EDGE_DIM, **kw)


def whole_graph_epochs(name: str) -> dict:
    """One process, every layer on the whole graph (its blocks carry every edge's type and
    features by CSC position), the full-graph loss, TYPED_EPOCHS epochs of the optimizer
    factory (Adam, SparseAdam for embedding tables): per epoch the loss and dense gradients,
    then the parameters."""
    import torch.nn.functional as nnf

    from gnnscale.cache.store import typed_inputs
    from gnnscale.sampling.base import Block
    from tests._typed_fns import dense_grads

    graph = case_graph(name)
    model = case_model(name, graph)
    opt = Adam(lr=0.01)(model)
    n = graph.num_nodes
    types = None if graph.type_per_edge is None else graph.type_per_edge.long()
    block = Block(graph.edge_index(), (n, n), torch.arange(n), e_id=torch.arange(graph.num_edges),
                  edge_type=types, edge_attr=graph.edge_attr)
    x = typed_inputs(graph, torch.arange(n)) if graph.is_typed else graph.x
    out = {"losses": [], "grads": []}
    for epoch in range(TYPED_EPOCHS):
        model.set_dropout_key(F.DROPOUT_SEED, epoch)
        opt.zero_grad()
        logits = model(x, [block] * model.num_layers)[graph.train_idx]
        loss = nnf.cross_entropy(logits, graph.y[graph.train_idx])
        loss.backward()
        out["losses"].append(float(loss.detach()))
        out["grads"].append(dense_grads(model))
        opt.step()
    out["params"] = [p.detach().clone() for p in model.parameters()]
    return out


def offload_epochs(topo, cases: list[tuple[str, dict]]) -> list[dict]:
    """Per case ``(model, options)``: TYPED_EPOCHS offloaded epochs on this rank (``topo``;
    None: one process), vertex ``v`` owned by rank ``v % world`` (on 4 ranks of the typed graph
    ranks 2 and 3 own no row of two of its types); per epoch the loss and the reduced gradients
    (dense), then the parameters and the last epoch's figures (and the planned edge feature
    bytes of an epoch)."""
    from gnnscale.distributed.topology import Topology
    from tests._typed_fns import dense_grads, skew_types

    if topo is None:
        topo = Topology(rank=0, world_size=1, local_rank=0, local_world_size=1,
                        device=torch.device("cpu"))
    results = []
    for name, opts in cases:
        graph = case_graph(name)
        part = skew_types(graph, torch.arange(graph.num_nodes) % topo.world_size, topo.world_size)
        provider = FixedPartition(PartitionBook.from_edge_cut(graph, part, topo.world_size))
        ctx = RunContext(topo=topo, graph=graph, model=case_model(name, graph), sampler=None,
                         cache_policy=NoCache(), deps=DepComm(), partition=provider,
                         optim=Adam(lr=0.01), seed=F.DROPOUT_SEED)
        strat = Offload(ctx, **opts)
        strat.setup()
        out = {"losses": [], "grads": []}
        for epoch in range(TYPED_EPOCHS):
            m = strat.train_epoch(epoch)
            out["losses"].append(m["train_loss"])
            out["grads"].append(dense_grads(strat.module))
        out["params"] = [p.detach().clone() for p in strat.module.parameters()]
        out["metrics"] = m
        out["planned_rows"] = strat.planned_rows_loaded()
        out["edge_type_ok"] = all(
            b.edge_type is None or torch.equal(b.edge_type, graph.type_per_edge[b.e_id].long())
            for b in strat.blocks)
        out["e_id_ok"] = all(b.e_id is None or torch.equal(
            graph.indices[b.e_id].long(), b.src_ids[b.edge_index[0]]) for b in strat.blocks)
        # every edge a chunk computes (forward, recomputed backward) brings its features
        out["planned_edge_bytes"] = 0 if graph.edge_attr is None else \
            strat.edges_per_epoch() * graph.edge_attr.shape[1] * 4
        results.append(out)
    return results
