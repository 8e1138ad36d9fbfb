"""Rank functions for the typed-training tests (module level, so spawn can import them): a
small typed graph with per-type feature widths and a featureless type (and, asked for, edge
features), a typed model (R-GCN by default; ``model`` names any of :data:`MODELS`; R-GAT reads
the edge features) under strategy=data and strategy=factored, and the one-process reference of
each."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gnnscale.cache.edges import EdgeFeatures
from gnnscale.cache.none import NoCache
from gnnscale.cache.store import typed_inputs
from gnnscale.data.graph import GraphStore
from gnnscale.deps.depcache import DepCache
from gnnscale.models.rgat import RGAT
from gnnscale.models.rgcn import RGCN
from gnnscale.models.simplehgn import SimpleHGN
from gnnscale.optim.adam import Adam
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.schedule import epoch_batches, sample_seed
from gnnscale.strategies.base import RunContext
from gnnscale.strategies.data.strategy import DataParallel
from gnnscale.strategies.factored.strategy import Factored

FANOUTS = [4, 3]
BATCH = 12
STEPS = 3


def make_typed_graph(edge_features: bool = False) -> GraphStore:
    """paper (6 features, 3 classes, the split), author (4 features), field (featureless);
    ``edge_features``: every edge type carries 2 (reverse types copy them)."""
    g = torch.Generator().manual_seed(11)
    n = {"paper": 60, "author": 40, "field": 15}
    edges = {
        ("author", "writes", "paper"): torch.stack([torch.randint(0, 40, (150,), generator=g),
                                                    torch.randint(0, 60, (150,), generator=g)]),
        ("paper", "cites", "paper"): torch.randint(0, 60, (2, 120), generator=g),
        ("paper", "has_topic", "field"): torch.stack([torch.randint(0, 60, (90,), generator=g),
                                                      torch.randint(0, 15, (90,), generator=g)]),
    }
    e = torch.Generator().manual_seed(12)
    attr = {et: torch.randn(ei.shape[1], 2, generator=e) for et, ei in edges.items()} \
        if edge_features else None
    return GraphStore.from_typed(
        n, edges, add_reverse=True, edge_attr=attr,
        features={"paper": torch.randn(60, 6, generator=g),
                  "author": torch.randn(40, 4, generator=g)},
        y={"paper": torch.randint(0, 3, (60,), generator=g)},
        train_idx={"paper": torch.arange(0, 40)}, val_idx={"paper": torch.arange(40, 50)},
        test_idx={"paper": torch.arange(50, 60)}, name="typed-tiny")


def skew_types(graph: GraphStore, part: torch.Tensor, world: int) -> torch.Tensor:
    """``part`` (vertex -> rank) on 4 ranks of the typed graph with every ``field`` row (the
    featureless type) on rank 0 and every ``author`` row on ranks 0 and 1, so ranks 2 and 3 own
    no row of either type (no table rows to look up, empty sends of those types); ``part``
    itself on any other graph or number of ranks."""
    if not graph.is_typed or world != 4:
        return part
    part = part.clone()
    for name, ranks in (("field", 1), ("author", 2)):
        t = graph.node_types.index(name)
        lo, hi = (int(v) for v in graph.node_type_offset[t:t + 2])
        part[lo:hi] = torch.arange(hi - lo) % ranks
    return part


def _typed_model(name: str, classes: int, **kw):
    """The typed model ``name`` (a key of :data:`MODELS`), ``kw`` its shared options."""
    if name == "rgcn":
        return RGCN(0, classes, num_bases=2, **kw)
    if name in USER:  # a user's homogeneous model converted by PyG's to_hetero, own dropout
        from gnnscale.models.to_hetero import ToHetero

        return ToHetero(0, classes, target=USER[name], hidden=kw["hidden"],
                        input_dropout=kw.get("input_dropout", 0.0),
                        kwargs={"hidden": kw["hidden"], "num_layers": kw["num_layers"],
                                "dropout": kw.get("dropout", 0.0)})
    if name == "simplehgn":
        return SimpleHGN(0, classes, heads=2, edge_emb=3,
                         **{**kw, "hidden": 4, "input_dropout": 0.0, "attn_dropout": 0.0})
    from gnnscale.models.hgat import HGAT
    from gnnscale.models.hgt import HGT
    from gnnscale.models.hsage import HSAGE

    return {"hsage": lambda: HSAGE(0, classes, **kw), "hgat": lambda: HGAT(0, classes, heads=2,
                                                                         **kw),
            "hgt": lambda: HGT(0, classes, heads=2, **kw)}[name]()


#: the typed models the harness trains (its 2-rank data test takes each)
MODELS = ("rgcn", "hsage", "hgat", "hgt")
#: users' homogeneous models converted by PyG's to_hetero (model=to_hetero): key -> target
#: (tests/integration/test_traced_models.py trains them under every strategy)
USER = {"to_hetero": "examples.models.SAGESkip",
        "to_hetero_bn": "tests._user_models.BatchNormSAGE"}  # batch statistics: data, factored


def make_model(graph: GraphStore, model: str = "rgcn"):
    """The typed model ``model`` bound to ``graph``: R-GCN (2 bases), R-GAT (2 heads, reading
    the graph's edge features when it has them), Simple-HGN (2 heads) or one of
    :data:`MODELS`."""
    torch.manual_seed(3)
    if model == "rgat":
        width = None if graph.edge_attr is None else int(graph.edge_attr.shape[1])
        out = RGAT(0, graph.num_classes, hidden=8, num_layers=len(FANOUTS), dropout=0.0,
                   heads=2, edge_dim=width)
    else:
        out = _typed_model(model, graph.num_classes, hidden=8, num_layers=len(FANOUTS),
                           dropout=0.0)
    out.bind_graph(graph)
    return out


def dense_grads(model: torch.nn.Module) -> list[torch.Tensor]:
    """Every parameter's gradient as a dense tensor (zeros where there is none)."""
    out = []
    for p in model.parameters():
        g = torch.zeros_like(p) if p.grad is None else p.grad
        out.append((g.to_dense() if g.is_sparse else g).clone())
    return out


def typed_data_steps_of(topo, models: tuple[str, ...]) -> list[dict]:
    """:func:`typed_data_steps` of each of ``models`` in turn, on one set of ranks."""
    return [typed_data_steps(topo, m) for m in models]


def typed_data_steps(topo, model: str = "rgcn") -> dict:
    """STEPS steps of strategy=data with ``model`` (R-GAT on the graph with edge features):
    every step's gradients and the final params."""
    graph = make_typed_graph(edge_features=model == "rgat")
    ctx = RunContext(topo=topo, graph=graph, model=make_model(graph, model),
                     sampler=NeighborSampler(FANOUTS), cache_policy=NoCache(), deps=DepCache(),
                     partition=None, seed=0, optim=Adam(lr=0.01))
    strat = DataParallel(ctx, batch_size=BATCH, prefetch=0)
    strat.setup()
    grads, losses = [], []
    for step in range(STEPS):
        mb = strat.sample(strat.schedule.draw(0, step, strat.slot))
        x = strat.gather(mb)  # the input rows (and the blocks' edge features, R-GAT)
        losses.append(strat.train_step(mb, x, graph.y[mb.targets]))
        grads.append(dense_grads(strat.module))
    params = [p.detach().clone() for p in strat.module.parameters()]
    return {"grads": grads, "params": params, "losses": losses}


def typed_factored_steps(topo, queue: str = "shared", samplers: str = "1",
                         model: str = "rgcn") -> dict:
    """One epoch of strategy=factored with ``model``; on a trainer every step's loss of each job
    (in slot order), its reduced gradients (embedding table's included, dense) and the final
    parameters; ``jobs``: the step's jobs (the reference's micro-batches per step)."""
    graph = make_typed_graph()
    ctx = RunContext(topo=topo, graph=graph, model=make_model(graph, model),
                     sampler=NeighborSampler(FANOUTS), cache_policy=NoCache(), deps=DepCache(),
                     partition=None, seed=0, optim=Adam(lr=0.01))
    strat = Factored(ctx, batch_size=BATCH, samplers=samplers, queue=queue, queue_depth=1)
    strat.setup()
    grads, losses = [], []
    train_step = strat.train_step

    def recorded(mb, x, y):  # data's step (routes, one rank): its loss and reduced gradients
        loss = train_step(mb, x, y)
        losses.append({strat.train_topo.rank: loss})
        grads.append(dense_grads(strat.module))
        return loss

    strat.train_step = recorded
    if strat.shared:
        strat.record = {"losses": [], "grads": []}
    metrics = strat.train_epoch(0)
    if strat.shared and strat.is_trainer:
        grads = [[g.to_dense() if g.is_sparse else g for g in step]
                 for step in strat.record["grads"]]
        for (_, step, slot), loss in strat.record["losses"]:
            losses.extend({} for _ in range(step + 1 - len(losses)))
            losses[step][slot] = loss
    params = [p.detach().clone() for p in strat.module.parameters()]
    return {"trainer": strat.is_trainer, "jobs": strat.jobs_per_step, "grads": grads,
            "losses": losses, "params": params, "steps": int(metrics.get("steps", 0))}


def typed_reference_steps(world_size: int, steps: int = STEPS, model: str = "rgcn") -> dict:
    """One process: per step, the mean of the world_size micro-batch losses (same optimizer
    factory: Adam for the dense parameters, SparseAdam for the embedding table); R-GAT's
    blocks carry their edge features."""
    graph = make_typed_graph(edge_features=model == "rgat")
    model = make_model(graph, model)
    opt = Adam(lr=0.01)(model)
    sampler = NeighborSampler(FANOUTS, with_edge_ids=model.reads_edge_features)
    edges = EdgeFeatures(graph) if model.reads_edge_features else None
    batches = epoch_batches(graph.train_idx, BATCH, 0, 0, min_size=world_size)
    grads, losses = [], []
    for step in range(steps):
        opt.zero_grad()
        per_rank = []
        for rank, targets in enumerate(torch.tensor_split(batches[step], world_size)):
            mb = sampler.sample(graph, targets, sample_seed(0, 0, step, rank))
            if edges is not None:
                edges.attach(mb.blocks)
            out = model(typed_inputs(graph, mb.input_nodes), mb.blocks)
            per_rank.append(F.cross_entropy(out, graph.y[mb.targets]))
        torch.stack(per_rank).mean().backward()
        grads.append(dense_grads(model))
        losses.append([float(v.detach()) for v in per_rank])
        opt.step()
    return {"grads": grads, "params": [p.detach().clone() for p in model.parameters()],
            "losses": losses}
