"""PreSC hotness computed by the samplers of ``strategy=factored`` (GNNLab section 6).

With ``cache=presample`` and sampler ranks, the trainers do not pre-sample: the samplers split
the K pre-sampling epochs' micro-batches (the draws of
:meth:`~gnnscale.cache.presample.PresamplePolicy.counts` on the run's schedule with the
trainers' world size, so the task's own seeds; job ``j`` to sampler ``j mod S``), each sums
its visit counts, and one SUM all-reduce on the queue group (trainers contribute zeros) hands
every rank the total. The trainers rank those counts exactly as the policy does, so their
cache equals the one a single process would choose (on a typed graph, the ranking over the
global ids that the typed store slices per featured type).
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from gnnscale.cache.presample import PresamplePolicy
from gnnscale.strategies.factored.protocol import FactoredRun


def samplers_presample(strat: FactoredRun) -> bool:
    """True when the samplers must pre-sample for this run's cache (collective decision: the
    same on every rank)."""
    policy, graph = strat.ctx.cache_policy, strat.ctx.graph
    if not isinstance(policy, PresamplePolicy) or strat.alloc.samplers == 0:
        return False
    if policy.auto:  # the budget is known on the trainers only (measured peak): pre-sample
        return True
    if graph.is_typed:  # each featured type caches its own rows (as the typed store sizes it)
        return any(x.shape[1] > 0 and policy.capacity(int(x.shape[0]),
                                                      int(x.shape[1]) * x.element_size()) > 0
                   for x in graph.features.values())
    row_bytes = graph.num_features * graph.x.element_size()
    return policy.capacity(graph.num_nodes, row_bytes) > 0


def presample_hotness(strat: FactoredRun) -> torch.Tensor | None:
    """The PreSC hotness for the trainers' caches, pre-sampled by the samplers (collective on
    the queue group); None when the trainers need none from them."""
    if not samplers_presample(strat):
        return None
    ctx, alloc, rank = strat.ctx, strat.alloc, strat.ctx.topo.rank
    policy = ctx.cache_policy
    t0 = time.perf_counter()
    if strat.is_trainer:
        counts = torch.zeros(ctx.graph.num_nodes, dtype=torch.float64)
    else:
        counts = policy.counts(ctx.graph, schedule=strat.schedule, sampler=ctx.sampler,
                               world_size=alloc.trainers,
                               shard=(rank - alloc.trainers, alloc.samplers))
    seconds = time.perf_counter() - t0
    timing = torch.tensor([seconds if not strat.is_trainer else 0.0], dtype=torch.float64)
    dist.all_reduce(counts, group=strat.queue_group)
    dist.all_reduce(timing, op=dist.ReduceOp.MAX, group=strat.queue_group)
    strat.presample_time = float(timing)
    if not strat.is_trainer:
        print(f"factored: sampler rank {rank} pre-sampled its share of {policy.epochs} PreSC "
              f"epoch(s) in {seconds:.2f} s", flush=True)
    elif rank == 0:
        print(f"factored: PreSC hotness from {alloc.samplers} sampler(s) in "
              f"{strat.presample_time:.2f} s (slowest sampler)", flush=True)
    return policy.rank(ctx.graph, counts) if strat.is_trainer else None
