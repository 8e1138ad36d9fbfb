"""Split parallelism (GSplit): every rank trains its split of ONE shared mini-batch sample.

Per step the leader samples the global mini-batch (ahead of training, in the prefetch thread,
or in ``strategy.sample_workers`` sampler processes) and broadcasts it on a dedicated process
group; every rank splits it online (native op) by owner: layer-0 vertices by where their
feature is cached, the others by the partition book.
A rank loads only the layer-0 rows it owns (its cache, or the host when no rank caches them),
then per layer shuffles hidden rows to the ranks whose destinations need them
(:mod:`gnnscale.deps.shuffle`) and runs the unmodified conv layer on its local block. The loss
of a rank's own targets is divided by the mini-batch size and parameter gradients are
sum-all-reduced, so a step equals one process training on the whole mini-batch.

``deps=hybrid`` lets a rank recompute a remote hidden row instead of receiving it when the
probed cost model says so; ``preaggregate`` makes senders average their edges into each remote
destination (exact for SAGE with mean/sum aggregation).
"""

from __future__ import annotations

import time
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from gnnscale.cache.store import build_feature_store
from gnnscale.deps.shuffle import ShuffleStats, shuffle
from gnnscale.distributed.collectives import sum_gradients
from gnnscale.errors import ConfigError
from gnnscale.registry import register
from gnnscale.sampling.base import Block, MiniBatch
from gnnscale.sampling.prefetch import Prefetcher
from gnnscale.sampling.schedule import sample_seed
from gnnscale.strategies.base import RunContext, SamplingStrategy
from gnnscale.strategies.split.splitter import SplitPlan, split_sample


@register("strategy", "split")
@dataclass
class SplitParallelConfig:
    """``strategy=split``'s options."""
    _target_: str = "gnnscale.strategies.split.SplitParallel"
    batch_size: int = 1024  # global mini-batch, split over the ranks by owner
    prefetch: int = 2  # mini-batches sampled and split ahead; 0 = inline
    preaggregate: bool = False  # senders average edges into remote destinations (SAGE)
    sample_workers: int = 0  # leader's sampler processes; 0 = it samples in the prefetch thread


def broadcast_sample(mb: MiniBatch | None, num_layers: int, group=None) -> MiniBatch:
    """Rank 0's sample on every rank: a header of sizes, then ids and edges in one tensor."""
    if dist.get_rank() == 0:
        head = [mb.n_id.numel(), mb.num_targets]
        for b in mb.blocks:
            head += [b.num_edges, b.num_src, b.num_dst]
        header = torch.tensor(head, dtype=torch.int64)
        body = torch.cat([mb.n_id.long()] + [b.edge_index.long().reshape(-1) for b in mb.blocks])
    else:
        header = torch.empty(2 + 3 * num_layers, dtype=torch.int64)
    dist.broadcast(header, 0, group=group)
    if dist.get_rank() != 0:
        h = header.tolist()
        body = torch.empty(h[0] + 2 * sum(h[2::3]), dtype=torch.int64)
    dist.broadcast(body, 0, group=group)
    if dist.get_rank() == 0:
        return mb
    h = header.tolist()
    n_id, pos, blocks = body[:h[0]], h[0], []
    for i in range(num_layers):
        e, ns, nd = h[2 + 3 * i: 5 + 3 * i]
        blocks.append(Block(body[pos:pos + 2 * e].view(2, e), (ns, nd), n_id[:ns]))
        pos += 2 * e
    return MiniBatch(n_id, blocks, h[1])


class SplitParallel(SamplingStrategy):
    """Every rank trains its split of one shared mini-batch sample (see the module docstring)."""

    name = "split"
    #: The split plans (pre-aggregation, GCN's source scaling) assume unweighted edges.
    takes_weighted_blocks = False
    deps = "communicate"
    default_deps, default_cache = "depcomm", "presample"  # GSplit's setting

    @classmethod
    def check(cls, cfg, built) -> None:
        """Pre-aggregation only where the model's aggregation makes it exact."""
        super().check(cfg, built)
        model = built.model
        if cfg.strategy.get("preaggregate") and not model.preaggregatable:
            raise ConfigError("strategy.preaggregate=true is exact only for a mean/sum "
                              "aggregation of the raw source rows (model=sage with aggr=mean|sum "
                              "and model.residual=false);"
                              f" {type(model).__name__} "
                              f"(aggr={getattr(model, 'aggr', None)!r}) is not: set "
                              "strategy.preaggregate=false")

    def __init__(self, ctx: RunContext, batch_size: int = 1024, prefetch: int = 2,
                 preaggregate: bool = False, sample_workers: int = 0) -> None:
        super().__init__(ctx, batch_size, prefetch, sample_workers)
        self._pool_feed: Any = None
        self.preagg = preaggregate
        self.gcn_block = getattr(ctx.model, "gcn_norm", None) == "block"

    # -- setup -------------------------------------------------------------------------------
    def setup(self) -> None:
        """Model, optimizer, feature store, partition book and the sample group."""
        ctx, topo = self.ctx, self.ctx.topo
        world, n = topo.world_size, ctx.graph.num_nodes
        self._module = ctx.model.to(topo.device)
        self._optimizer = ctx.optim(self._module)
        # samples are broadcast on a gloo group of their own (on the host, under nccl too)
        self.sample_group = dist.new_group(backend="gloo") if world > 1 else None
        self.own_part = (self.partition_book("edge_cut").part.int() if world > 1
                         else torch.zeros(n, dtype=torch.int32))
        part = self.own_part if ctx.cache_policy.placement == "partitioned" else None
        # a rank loads only rows it caches or no rank caches: never a peer's (fetch_remote)
        self.store = build_feature_store(
            ctx.graph, ctx.cache_policy, topo=topo, device=topo.device,
            train_idx=ctx.graph.train_idx, sampler=ctx.sampler, batch_size=self.batch_size,
            part=part, seed=ctx.seed, fetch_remote=False,
        )
        # layer-0 owner: the rank caching the feature, else the partition owner
        self.own_in = self.own_part.clone()
        if self.store.owner is not None:
            cached = self.store.owner.cpu()
            self.own_in = torch.where(cached >= 0, cached, self.own_part).int()
        self.labels = ctx.graph.y
        self.stats = ShuffleStats()
        self.allreduce_seconds, self.allreduce_bytes = 0.0, 0
        dims = self._dims()
        row_bytes = 4 * max(dims[1:] or [1])
        self.budget = ctx.deps.replication_budget(row_bytes) if world > 1 else 0
        self.costs = None
        if self.budget > 0:
            ctx.deps.prepare(group=None)  # the planning interface fullgraph calls too
            self.costs = ctx.deps.replication_costs(dims)
        if topo.rank == 0:  # the leader samples for everyone
            self.start_sampler_pool()

    def _dims(self) -> list[int]:
        """Row widths of layers 0..L: the inputs, then each layer's output."""
        return self._module.widths(self.ctx.graph.num_features)

    # -- one step ----------------------------------------------------------------------------
    def sample(self, job: tuple[int, int, torch.Tensor]) -> MiniBatch:
        """The shared sample of one step (collective: rank 0 samples, the others receive)."""
        epoch, step, targets = job
        ctx = self.ctx
        mb = None
        if ctx.topo.rank == 0 and self._pool_feed is not None:
            mb, _ = next(self._pool_feed)  # the pool yields the epoch's jobs in step order
        elif ctx.topo.rank == 0:
            mb = ctx.sampler.sample(ctx.graph, targets, sample_seed(ctx.seed, epoch, step, 0))
        if ctx.topo.world_size == 1:
            return mb
        return broadcast_sample(mb, ctx.sampler.num_layers, self.sample_group)

    def split(self, mb: MiniBatch) -> SplitPlan:
        """The native split of one shared sample into this run's per-rank plans."""
        topo = self.ctx.topo
        return split_sample(mb, self.own_in, self.own_part, topo.world_size, topo.rank,
                            preagg=self.preagg, costs=self.costs, budget=self.budget,
                            gcn_block_norm=self.gcn_block)

    def prepare(self, job: tuple[int, int, torch.Tensor]) -> tuple[MiniBatch, SplitPlan, float]:
        """Sample (or receive) and split one step; returns the split's seconds too."""
        mb = self.sample(job)
        t0 = time.perf_counter()
        plan = self.split(mb)
        return mb, plan, time.perf_counter() - t0

    def load(self, mb: MiniBatch, plan: SplitPlan) -> torch.Tensor:
        """This rank's layer-0 rows: its cached ones and the ones no rank caches."""
        return self.store.gather(mb.n_id[plan.loaded])

    def forward(self, x: torch.Tensor, plan: SplitPlan) -> torch.Tensor:
        """Shuffle + local conv per layer; returns the rows of this rank's targets."""
        dev = x.device
        world = self.ctx.topo.world_size
        h = x
        for i, lp in enumerate(plan.layers):
            src = h
            if lp.slot_count.numel():
                agg = h.new_zeros(lp.slot_count.numel(), h.shape[1]).index_add(
                    0, lp.agg_slot.to(dev), h[lp.agg_row.to(dev)])
                src = torch.cat([h, agg / lp.slot_count.to(dev, h.dtype)[:, None]])
            if world > 1:
                recv = shuffle(src, lp.send_idx, lp.send_counts, lp.recv_counts,
                               stats=self.stats)
                src = torch.cat([h, recv])
            xi = src[lp.gather.to(dev)]
            if lp.scale is not None:
                xi = xi * lp.scale.to(dev)[:, None]
            h = self._module.layer(i, xi, lp.block.to(dev))
        return h

    def step(self, epoch: int, index: int, batch: torch.Tensor) -> float:
        """One whole step inline (sample or receive, split, load, train); returns the loss of
        the whole mini-batch. Collective."""
        mb, plan, _ = self.prepare((epoch, index, batch))
        self.last_plan = plan
        return self.train_step(mb, plan, self.load(mb, plan))

    def train_step(self, mb: MiniBatch, plan: SplitPlan, x: torch.Tensor) -> float:
        """Forward, backward, summed gradient all-reduce and optimizer step; returns the loss
        of the whole mini-batch (the same on every rank)."""
        self._module.train()
        self._optimizer.zero_grad(set_to_none=True)
        out = self.forward(x, plan)
        y = self.labels[mb.n_id[plan.targets]].to(out.device)
        loss = F.cross_entropy(out, y, reduction="sum") / mb.num_targets
        loss.backward()
        total = self.allreduce_grads(loss.detach())
        self._optimizer.step()
        return total

    def allreduce_grads(self, loss: torch.Tensor) -> float:
        """Sum every parameter gradient (and the loss) over ranks in one flat buffer."""
        t0 = time.perf_counter()
        total, nbytes = sum_gradients(list(self._module.parameters()), loss)
        if nbytes:
            self.allreduce_seconds += time.perf_counter() - t0
            self.allreduce_bytes += nbytes
        return total

    # -- epoch -------------------------------------------------------------------------------
    def train_epoch(self, epoch: int, progress: Any = None) -> dict[str, float]:
        """Every shared mini-batch of ``epoch``: split, load owned rows, shuffle, train."""
        ctx, world = self.ctx, self.ctx.topo.world_size
        jobs = [(epoch, s, b) for s, b in enumerate(self.epoch_batches(epoch))]
        m = dict.fromkeys(("sample_time", "split_time", "load_time", "compute_time",
                           "train_loss", "edges_computed", "nodes_loaded", "steps",
                           "replicated_rows", "edge_ratio_sum"), 0.0)
        per_rank = [0] * world
        self.stats.reset()
        self.allreduce_seconds, self.allreduce_bytes = 0.0, 0
        self.store.reset_epoch()
        if self.pool is not None:
            self._pool_feed = self.pool.map(
                [(b, sample_seed(ctx.seed, epoch, s, 0)) for _, s, b in jobs])
        t_epoch = time.perf_counter()
        try:
            self._run_steps(jobs, m, per_rank, progress)
        finally:
            if self._pool_feed is not None:  # after the prefetch thread is done with it
                self._pool_feed.close()
                self._pool_feed = None
        m["epoch_time"] = time.perf_counter() - t_epoch
        steps = max(m["steps"], 1)
        m["train_loss"] /= steps
        m["local_edge_ratio"] = m.pop("edge_ratio_sum") / steps
        mean = sum(per_rank) / world
        m["edge_skew"] = max(per_rank) / mean if mean else 1.0
        m["comm_time"] = self.stats.seconds + self.allreduce_seconds
        m["bytes_shuffled"] = float(self.stats.bytes_sent)
        m["bytes_allreduce"] = float(self.allreduce_bytes)
        m.update(self.store.epoch_stats())
        return m

    def _run_steps(self, jobs: list, m: dict[str, float], per_rank: list[int],
                   progress: Any) -> None:
        """Train ``jobs`` in order, adding to the metrics ``m`` and the per-rank edges."""
        ctx = self.ctx
        with closing(iter(Prefetcher(self.prepare, jobs, self.prefetch))) as feed:
            for (mb, plan, t_split), t_prep in feed:
                m["sample_time"] += t_prep - t_split
                m["split_time"] += t_split
                t0 = time.perf_counter()
                x = self.load(mb, plan)
                t1 = time.perf_counter()
                m["train_loss"] += self.train_step(mb, plan, x)
                m["load_time"] += t1 - t0
                m["compute_time"] += time.perf_counter() - t1
                m["edges_computed"] += plan.edges_per_rank[ctx.topo.rank]
                m["nodes_loaded"] += plan.loaded.numel()
                self.visited(mb.input_nodes)  # every rank: the same sample (same ranking)
                m["replicated_rows"] += plan.replicated
                m["edge_ratio_sum"] += plan.local_edges / max(plan.total_edges, 1)
                for r, e in enumerate(plan.edges_per_rank):
                    per_rank[r] += e
                m["steps"] += 1
                if progress is not None:
                    progress.update(1)
