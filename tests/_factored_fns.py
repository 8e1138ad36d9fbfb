"""Rank functions for the factored-strategy tests (module level, so spawn can import them)."""

from __future__ import annotations

import dataclasses
import time

import torch
import torch.nn.functional as F

from gnnscale.cache.none import NoCache
from gnnscale.deps.depcache import DepCache
from gnnscale.optim.adam import Adam
from gnnscale.sampling.neighbor import NeighborSampler
from gnnscale.sampling.random_walk import RandomWalkSampler
from gnnscale.sampling.schedule import Schedule, epoch_batches, sample_seed
from gnnscale.strategies.base import RunContext
from gnnscale.strategies.data.strategy import DataParallel
from gnnscale.strategies.factored.strategy import Factored
from tests._data_fns import FANOUTS, graph_for, make_graph, make_model

BATCH = 67  # 200 training vertices: exactly 3 steps per epoch


def make_sampler(name: str = "neighbor"):
    """The tests' sampler: ``neighbor`` (FANOUTS) or ``random_walk`` (weighted blocks)."""
    if name == "random_walk":
        return RandomWalkSampler(num_layers=len(FANOUTS), num_walks=4, walk_length=3, top_k=5)
    return NeighborSampler(FANOUTS)


def train_one_epoch(topo, kind: str, samplers: str = "1", queue_depth: int = 1,
                    switching: bool = False, staleness: int = 0, epochs: int = 1,
                    sampler: str = "neighbor", queue: str = "routes", prefetch: int = 1,
                    hosts: int = 1, jobs_per_trainer: int = 1, slow_rank: int = -1,
                    model: str = "sage") -> dict:
    """``epochs`` epochs of ``kind`` (factored or data); every step's loss and gradients on a
    trainer, the final parameters, the jobs this rank handled and its last metrics. With the
    shared queue, switching or staleness, ``record`` holds each job's loss and each step's
    reduced gradients on every rank that trains. ``hosts`` > 1: the ranks take themselves for
    ``hosts`` hosts of consecutive ranks (each host opens its own ring). ``jobs_per_trainer``:
    the shared queue's jobs per trainer and step; rank ``slow_rank`` sleeps 0.2 s before each
    job it trains (a slowed trainer: the others take more of each step's jobs). ``model``: as
    :func:`tests._data_fns.make_model` names it."""
    if hosts > 1:
        per = topo.world_size // hosts
        topo = dataclasses.replace(topo, local_rank=topo.rank % per, local_world_size=per)
    graph = graph_for(model)
    ctx = RunContext(topo=topo, graph=graph, model=make_model(graph, model),
                     sampler=make_sampler(sampler), cache_policy=NoCache(), deps=DepCache(),
                     partition=None, seed=0, optim=Adam(lr=0.01))
    if kind == "factored":
        strat = Factored(ctx, batch_size=BATCH, samplers=samplers, queue_depth=queue_depth,
                         switching=switching, staleness=staleness, queue=queue,
                         prefetch=prefetch, jobs_per_trainer=jobs_per_trainer)
    else:
        strat = DataParallel(ctx, batch_size=BATCH, prefetch=0)
    strat.setup()
    losses, grads = [], []
    train_step = strat.train_step

    def recorded(mb, x, y):  # the real step; its loss and averaged gradients are kept
        loss = train_step(mb, x, y)
        losses.append(loss)
        grads.append([p.grad.clone() for p in strat.module.parameters()])
        return loss

    strat.train_step = recorded
    if topo.rank == slow_rank:  # called once before each job it trains (shared queue)
        visited = strat.visited

        def slowed(nodes):
            time.sleep(0.2)
            visited(nodes)

        strat.visited = slowed
    if getattr(strat, "synced", False) or getattr(strat, "shared", False):
        strat.record = {"losses": [], "grads": []}
    for epoch in range(epochs):
        metrics = strat.train_epoch(epoch)
    return {"trainer": getattr(strat, "is_trainer", True), "losses": losses, "grads": grads,
            "params": [p.detach().clone() for p in strat.module.parameters()],
            "jobs": list(getattr(strat, "job_log", [])),
            "trained": list(getattr(strat, "trained_log", [])),
            "record": getattr(strat, "record", None), "metrics": metrics}


def reference_epoch(trainers: int, sampler_name: str = "neighbor", model: str = "sage") -> dict:
    """One process: per step, the mean of the ``trainers`` micro-batch losses (a model that
    reads edge features: each block's ``edge_attr`` is ``graph.edge_attr[e_id]``)."""
    graph = graph_for(model)
    model = make_model(graph, model)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sampler = make_sampler(sampler_name)
    sampler.with_edge_ids = model.reads_edge_features
    grads, losses = [], []
    for step, batch in enumerate(epoch_batches(graph.train_idx, BATCH, 0, 0,
                                               min_size=trainers)):
        opt.zero_grad()
        per_rank = []
        for rank, targets in enumerate(torch.tensor_split(batch, trainers)):
            mb = sampler.sample(graph, targets, sample_seed(0, 0, step, rank))
            for b in mb.blocks if model.reads_edge_features else ():
                b.edge_attr = graph.edge_attr[b.e_id]
            out = model(graph.x[mb.input_nodes], mb.blocks)
            per_rank.append(F.cross_entropy(out, graph.y[mb.targets]))
        torch.stack(per_rank).mean().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
        losses.append([float(v.detach()) for v in per_rank])
        opt.step()
    return {"grads": grads, "losses": losses,
            "params": [p.detach().clone() for p in model.parameters()]}


class _FailingSampler(NeighborSampler):
    """A real neighbour sampler that dies on its second draw (a sampler crashing mid-epoch)."""

    def __init__(self, fanouts: list[int]) -> None:
        super().__init__(fanouts)
        self.draws = 0

    def sample(self, graph, seeds, seed=0):
        self.draws += 1
        if self.draws == 2:
            raise RuntimeError("sampler died mid-epoch")
        return super().sample(graph, seeds, seed)


def sampler_dies(topo, switching: bool = False, queue: str = "shared") -> None:
    """Rank 1 samples and raises on its second job; rank 0 trains and waits for it."""
    graph = make_graph()
    ctx = RunContext(topo=topo, graph=graph, model=make_model(graph),
                     sampler=_FailingSampler(FANOUTS), cache_policy=NoCache(), deps=DepCache(),
                     partition=None, seed=0, optim=Adam(lr=0.01))
    strat = Factored(ctx, batch_size=BATCH, samplers="1", queue_depth=1,
                     switching=switching, queue=queue)
    strat.setup()
    strat.train_epoch(0)


def presc_cache(topo, samplers: str, ratio: float = 0.2, epochs: int = 2) -> dict:
    """Set up ``factored`` with ``cache=presample``: this rank's role and cached ids."""
    from gnnscale.cache.presample import PresamplePolicy

    graph = make_graph()
    ctx = RunContext(topo=topo, graph=graph, model=make_model(graph),
                     sampler=NeighborSampler(FANOUTS),
                     cache_policy=PresamplePolicy(epochs=epochs, ratio=ratio), deps=DepCache(),
                     partition=None, seed=0, optim=Adam(lr=0.01))
    strat = Factored(ctx, batch_size=BATCH, samplers=samplers)
    strat.setup()
    out = {"trainer": strat.is_trainer, "presample_time": strat.presample_time}
    if strat.is_trainer:
        out["cached"] = strat.store.cached_ids.tolist()
        out["metrics"] = strat.train_epoch(0)
    else:
        strat.train_epoch(0)
    return out


def presc_reference(trainers: int, ratio: float = 0.2, epochs: int = 2) -> list[int]:
    """The ids one process caches with the policy's own pre-sampling for ``trainers`` ranks."""

    from gnnscale.cache.presample import PresamplePolicy
    from gnnscale.cache.store import build_feature_store
    from gnnscale.distributed.launch import Topology

    graph = make_graph()
    topo = Topology(0, trainers, 0, trainers, torch.device("cpu"))
    store = build_feature_store(graph, PresamplePolicy(epochs=epochs, ratio=ratio),
                                topo=topo, schedule=Schedule(graph.train_idx, batch_size=BATCH,
                                                             seed=0),
                                sampler=NeighborSampler(FANOUTS), seed=0)
    return store.cached_ids.tolist()


def ring_round_trip(topo, jobs: int, slots: int) -> dict:
    """Rank 0 makes a ring; ranks 1.. make jobs ``0 .. jobs-1`` (claimed in turn), every rank
    takes jobs as they come; returns what this rank made and took (job, payload sum)."""
    import torch.distributed as dist

    from gnnscale.distributed.ring import JobRing

    shape = dict(slots=slots, slot_bytes=4096, procs=topo.world_size, timeout_s=30.0)
    ring = JobRing.create(**shape) if topo.rank == 0 else None
    handle = torch.tensor(ring.handle if ring else (0, 0))
    dist.broadcast(handle, 0)
    ring = ring or JobRing.attach(tuple(handle.tolist()), **shape)
    ring.start(100)  # jobs numbered from 100
    dist.barrier()
    made, taken, full = [], [], 0
    end = 100 + jobs
    while True:
        if topo.rank > 0 and (job := ring.claim_make(end)) is not None:
            parts = (torch.arange(job % 7 + 1), torch.full((job % 3,), job))
            while not ring.try_put(job, parts, topo.rank):
                full += 1
                got = ring.try_take(end)  # a producer may take while the ring is full
                if got is not None:
                    taken.append((got[0], [p.tolist() for p in got[1]]))
            made.append(job)
            continue
        got = ring.try_take(end)
        if got is not None:
            taken.append((got[0], [p.tolist() for p in got[1]]))
        elif ring.next_take >= end:
            break
    dist.barrier()
    ring.close()
    return {"made": made, "taken": taken, "full": full}
