"""Rank functions for the split-parallel tests (module level, so spawn can import them)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gnnscale.cache.none import NoCache
from gnnscale.deps.depcomm import DepComm
from gnnscale.deps.hybrid import Hybrid
from gnnscale.models.gat import GAT
from gnnscale.models.gcn import GCN
from gnnscale.models.sage import SAGE
from gnnscale.optim.adam import Adam
from gnnscale.partition import PartitionBook
from gnnscale.partition.provider import FixedPartition
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.schedule import epoch_batches, sample_seed
from gnnscale.strategies.base import RunContext
from gnnscale.strategies.split.strategy import SplitParallel
from tests import _user_models
from tests._data_fns import make_graph

FANOUTS = [4, 3]
BATCH = 48


def make_model(name: str, graph):
    torch.manual_seed(3)
    if name.startswith("user_"):  # a user's own model (model=custom)
        model = _user_models.wrap(name, graph.num_features, graph.num_classes, len(FANOUTS),
                                  graph=graph)
        model.bind_graph(graph)  # a traced GCNConv's degrees (as build_model binds them)
        return model
    kw = dict(hidden=16, num_layers=len(FANOUTS), dropout=0.0)
    if name.endswith("_res"):  # the residual stack (model.residual)
        name = name[: -len("_res")]
        kw.update(residual=True, norm="layer", activation="gelu")
    if name == "sage":
        return SAGE(graph.num_features, graph.num_classes, **kw)
    if name.startswith("gcn"):
        model = GCN(graph.num_features, graph.num_classes, gcn_norm=name.split("_")[1], **kw)
        model.bind_graph(graph)
        return model
    return GAT(graph.num_features, graph.num_classes, heads=2, **kw)


def scattered_part(n: int, world: int) -> torch.Tensor:
    """A deliberately poor partition (many remote edges) to stress the shuffle."""
    return (torch.arange(n) * 7 + 3) % world


def make_ctx(topo, model: str, deps: str, parts: int | None = None) -> RunContext:
    graph = make_graph()

    k = parts or topo.world_size
    book = PartitionBook.from_edge_cut(graph, scattered_part(graph.num_nodes, k), k)
    dm = DepComm() if deps == "depcomm" else Hybrid(comm_weight=1e6)
    return RunContext(topo=topo, graph=graph, model=make_model(model, graph),
                      sampler=NeighborSampler(FANOUTS), cache_policy=NoCache(), deps=dm,
                      partition=FixedPartition(book), seed=0, optim=Adam(lr=0.01))


def split_cases(topo, cases: list[tuple[str, str, bool, bool]],
                inputs: tuple[str, ...] = ("shuffle",)) -> list[dict]:
    """Per case (model, deps, preaggregate, shifted layer-0 owners) and per ``strategy.inputs``
    mode in ``inputs`` (pre-aggregated cases: shuffle only): one step's loss, gradients and
    this rank's plan (vertices computed per layer, rows loaded), keyed by the mode."""
    results = []
    for model, deps, preagg, shift in cases:
        per_mode = {}
        for mode in inputs:
            if preagg and mode == "read":
                continue
            ctx = make_ctx(topo, model, deps)
            strat = SplitParallel(ctx, batch_size=BATCH, prefetch=0, preaggregate=preagg,
                                  inputs=mode)
            strat.setup()
            if shift:  # layer-0 owners differ from the partition (as when caches decide)
                strat.own_in = (strat.own_part + 1) % topo.world_size
            mb, plan, _ = strat.prepare(strat.schedule.draw(0, 0, 0))
            x = strat.load(mb, plan)
            loss = strat.train_step(mb, plan, x)
            per_mode[mode] = {
                "loss": loss, "grads": [p.grad.clone() for p in strat.module.parameters()],
                "dst": [mb.n_id[lp.dst] for lp in plan.layers],
                "loaded": mb.n_id[plan.loaded], "read": strat.input_ids(plan),
                "block_sources": plan.layers[0].block.src_ids,
                "replicated": plan.replicated,
                "edges": plan.edges_per_rank, "total_edges": plan.total_edges,
                "shuffled": strat.stats.bytes_sent,
                "requested": strat.store.totals["requested"],
            }
            strat.close()
        results.append(per_mode)
    return results


def reference(model: str) -> dict:
    """One process training on the same mini-batch."""
    graph = make_graph()
    net = make_model(model, graph)
    sampler = NeighborSampler(FANOUTS)
    batch = epoch_batches(graph.train_idx, BATCH, 0, 0, min_size=1)[0]
    mb = sampler.sample(graph, batch, sample_seed(0, 0, 0, 0))
    out = net(graph.x[mb.input_nodes], mb.blocks)
    loss = F.cross_entropy(out, graph.y[mb.targets])
    loss.backward()
    return {"loss": float(loss.detach()), "grads": [p.grad.clone() for p in net.parameters()],
            "n_id": mb.n_id, "sizes": [b.num_dst for b in mb.blocks],
            "inputs": mb.input_nodes, "edges": mb.num_edges}


def fail_mid_shuffle(topo) -> None:
    """Rank 1 dies after the first layer's shuffle; the others block in the second."""
    ctx = make_ctx(topo, "sage", "depcomm")
    strat = SplitParallel(ctx, batch_size=BATCH, prefetch=0)
    strat.setup()
    if topo.rank == 1:
        layer = strat.module.layer

        def dying(i, x, block):
            if i == 1:
                raise RuntimeError("rank 1 fails mid-shuffle on purpose")
            return layer(i, x, block)

        strat.module.layer = dying
    mb, plan, _ = strat.prepare(strat.schedule.draw(0, 0, 0))
    strat.train_step(mb, plan, strat.load(mb, plan))


def round_parts(topo) -> dict:
    """One round of parallel split-samplers (``sample_on=all``): per step, whether the plan this
    rank received equals its own split of that step's sample (drawn here again), and the bytes
    it received against the packed size of its parts split on the other ranks."""
    from gnnscale.strategies.split.splitter import pack_plan, split_sample
    from gnnscale.strategies.split.strategy import _as_words

    ctx = make_ctx(topo, "sage", "depcomm")
    strat = SplitParallel(ctx, batch_size=BATCH, prefetch=0, sample_on="all")
    strat.setup()
    world, rank = topo.world_size, topo.rank
    batches = epoch_batches(ctx.graph.train_idx, BATCH, 0, 0, min_size=world)[:world]
    strat.received_bytes = 0
    got = strat.prepare_round(list(strat.schedule.draws(0, steps=range(world))))
    same, expected_bytes = [], 0
    for s, (plan, _, _) in enumerate(got):
        mb = ctx.sampler.sample(ctx.graph, ctx.task.seeds(batches[s], 0), sample_seed(0, 0, s, 0))
        mine = pack_plan(split_sample(mb, strat.own_in, strat.own_part, world, rank,
                                       read_inputs=strat.reads_inputs))
        same.append(torch.equal(pack_plan(plan), mine))
        if s % world != rank:  # split on the rank that sampled step s, sent here
            expected_bytes += _as_words(mine).numel() * 8
    out = {"same": same, "received": strat.received_bytes, "expected": expected_bytes}
    strat.close()
    return out


# -- typed graphs and edge features (R-GCN with a featureless type; GAT/GINE with edge_dim) --
TYPED_STEPS = 3
#: per model: its graph's batch size (the typed graph trains 40 papers)
TYPED_BATCH = {"rgcn": 12, "rgat": 12, "gat_edge": BATCH, "gine": BATCH,
               # users' models traced into stages (tests/_user_models.py TRACED_EDGES)
               **{f"user_{m}": BATCH for m in ("t_transformer_e", "t_gine", "t_gatv2e")},
               "to_hetero": 12}  # a user's model converted by to_hetero (the typed graph)


def _typed_case(model: str):
    """``(graph, model)`` of a case: R-GCN on the tiny typed graph (a featureless type,
    per-type widths), R-GAT on it with edge features, or a model reading edge features on a
    homogeneous graph that has them."""
    from tests import _data_fns, _typed_fns

    if model in ("rgcn", "rgat", *_typed_fns.USER):  # R-GAT: the typed graph, edge features
        graph = _typed_fns.make_typed_graph(edge_features=model == "rgat")
        return graph, _typed_fns.make_model(graph, model)
    graph = _data_fns.graph_for(model)
    return graph, _data_fns.make_model(graph, model)


def typed_split_steps(topo, models: list[str]) -> dict:
    """Per model, TYPED_STEPS steps of strategy=split (scattered partition; on 4 ranks of the
    typed graph ranks 2 and 3 own no row of two of its types): each step's loss,
    its summed gradients (embedding tables' as dense), the local blocks' edge ids of the first
    step, the final parameters and the epoch's edge feature bytes."""
    from tests._typed_fns import dense_grads, skew_types

    out = {}
    for name in models:
        graph, model = _typed_case(name)
        world = topo.world_size
        part = skew_types(graph, scattered_part(graph.num_nodes, world), world)
        book = PartitionBook.from_edge_cut(graph, part, world)
        ctx = RunContext(topo=topo, graph=graph, model=model, sampler=NeighborSampler(FANOUTS),
                         cache_policy=NoCache(), deps=DepComm(), partition=FixedPartition(book),
                         seed=0, optim=Adam(lr=0.01))
        strat = SplitParallel(ctx, batch_size=TYPED_BATCH[name], prefetch=0, sample_on="leader")
        strat.setup()
        losses, grads, e_ids = [], [], []
        if strat.edges is not None:
            strat.edges.reset_epoch()
        for step in range(TYPED_STEPS):
            losses.append(strat.step(0, step))
            grads.append(dense_grads(strat.module))
            if step == 0:
                e_ids = [lp.block.e_id for lp in strat.last_plan.layers]
        out[name] = {"losses": losses, "grads": grads, "e_ids": e_ids,
                     "params": [p.detach().clone() for p in strat.module.parameters()],
                     "edge_bytes": None if strat.edges is None else strat.edges.bytes,
                     "sparse": len(strat._sparse)}
        strat.close()
    return out


def typed_reference_steps(name: str, world: int) -> dict:
    """One process training on the same TYPED_STEPS whole mini-batches (the typed graph's raw
    rows through ``model.encode``; edge features gathered by the blocks' edge ids)."""
    from gnnscale.cache.edges import attach_host
    from gnnscale.cache.store import typed_inputs
    from tests._typed_fns import dense_grads

    graph, model = _typed_case(name)
    opt = Adam(lr=0.01)(model)
    sampler = NeighborSampler(FANOUTS, with_edge_ids=True)
    batches = epoch_batches(graph.train_idx, TYPED_BATCH[name], 0, 0, min_size=world)
    losses, grads, e_ids = [], [], []
    for step in range(TYPED_STEPS):
        opt.zero_grad()
        mb = sampler.sample(graph, batches[step], sample_seed(0, 0, step, 0))
        if model.reads_edge_features:
            attach_host(graph, mb.blocks)
        x = typed_inputs(graph, mb.input_nodes) if graph.is_typed else graph.x[mb.input_nodes]
        loss = F.cross_entropy(model(x, mb.blocks), graph.y[mb.targets])
        loss.backward()
        losses.append(float(loss.detach()))
        grads.append(dense_grads(model))
        if step == 0:
            e_ids = [b.e_id for b in mb.blocks]
        opt.step()
    return {"losses": losses, "grads": grads, "e_ids": e_ids,
            "params": [p.detach().clone() for p in model.parameters()]}
