"""Rank functions for split with dropout on (tests/integration/test_split_dropout.py): a few
steps of strategy=split with the model's dropout 0.5 (built-in SAGE's hidden and input dropout,
a residual stack's, a traced user model's own ``F.dropout`` calls), against one process
training the same mini-batches with the same keyed masks."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gnnscale.cache.none import NoCache
from gnnscale.deps.depcomm import DepComm
from gnnscale.deps.hybrid import Hybrid
from gnnscale.models.sage import SAGE
from gnnscale.optim.adam import Adam
from gnnscale.partition import PartitionBook
from gnnscale.partition.provider import FixedPartition
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.schedule import epoch_batches, sample_seed
from gnnscale.strategies.base import RunContext
from gnnscale.strategies.split.strategy import SplitParallel, dropout_step_key
from tests import _user_models
from tests._data_fns import make_graph
from tests._split_fns import BATCH, FANOUTS, scattered_part

STEPS = 2
SEED = 5
P = 0.5


def make_model(name: str, graph, p: float = P) -> torch.nn.Module:
    """``sage`` (hidden dropout ``p``, input dropout 0.2), ``sage_res`` (the residual stack:
    its projection's and feed-forward's dropout) or ``user_<key>``: a traced user model whose
    own dropout calls have rate ``p``."""
    torch.manual_seed(3)
    if name.startswith("user_"):
        model = _user_models.wrap(name, graph.num_features, graph.num_classes, len(FANOUTS),
                                  dropout=p, graph=graph)
        model.bind_graph(graph)
        return model
    kw: dict = dict(hidden=16, num_layers=len(FANOUTS), dropout=p, input_dropout=0.2 * p / P)
    if name == "sage_res":
        kw.update(residual=True, norm="layer", activation="gelu")
    return SAGE(graph.num_features, graph.num_classes, **kw)


def split_steps(topo, cases: list[tuple[str, str, str]]) -> list[dict]:
    """Per case (model, deps, ``strategy.inputs``): STEPS steps of strategy=split (scattered
    partition; ``hybrid``: replication made cheap, so ranks recompute remote rows), each
    step's loss and summed gradients, and the rows replicated."""
    out = []
    for name, deps, inputs in cases:
        graph = make_graph()
        world = topo.world_size
        book = PartitionBook.from_edge_cut(graph, scattered_part(graph.num_nodes, world), world)
        ctx = RunContext(topo=topo, graph=graph, model=make_model(name, graph),
                         sampler=NeighborSampler(FANOUTS), cache_policy=NoCache(),
                         deps=DepComm() if deps == "depcomm" else Hybrid(comm_weight=1e6),
                         partition=FixedPartition(book), seed=SEED, optim=Adam(lr=0.01))
        strat = SplitParallel(ctx, batch_size=BATCH, prefetch=0, inputs=inputs)
        strat.setup()
        losses, grads, replicated = [], [], 0
        for step in range(STEPS):
            losses.append(strat.step(0, step))
            grads.append([p.grad.clone() for p in strat.module.parameters()])
            replicated += strat.last_plan.replicated
        out.append({"losses": losses, "grads": grads, "replicated": replicated,
                    "key_after": strat.module.dropout_key})
        strat.close()
    return out


def reference_steps(name: str, world: int, p: float = P) -> dict:
    """One process training the same STEPS whole mini-batches, each step's masks keyed as
    split keys them (seed, :func:`dropout_step_key`, layer, global vertex id)."""
    graph = make_graph()
    model = make_model(name, graph, p)
    opt = Adam(lr=0.01)(model)
    sampler = NeighborSampler(FANOUTS)
    batches = epoch_batches(graph.train_idx, BATCH, SEED, 0, min_size=world)
    losses, grads = [], []
    model.train()
    for step in range(STEPS):
        opt.zero_grad()
        mb = sampler.sample(graph, batches[step], sample_seed(SEED, 0, step, 0))
        model.set_dropout_key(SEED, dropout_step_key(0, step))
        loss = F.cross_entropy(model(graph.x[mb.input_nodes], mb.blocks), graph.y[mb.targets])
        loss.backward()
        losses.append(float(loss.detach()))
        grads.append([q.grad.clone() for q in model.parameters()])
        opt.step()
    return {"losses": losses, "grads": grads}
