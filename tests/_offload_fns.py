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
