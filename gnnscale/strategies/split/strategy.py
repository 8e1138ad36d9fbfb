"""Split parallelism (GSplit): every rank trains its split of ONE shared mini-batch sample.

Per step the leader samples the global mini-batch (ahead of training, in the prefetch thread,
or in ``strategy.sample_workers`` sampler processes) and broadcasts it on a dedicated process
group; every rank splits it online (native op) by owner: layer-0 vertices by where their
feature is cached, the others by the partition book.
Where its layer-0 rows come from is ``strategy.inputs``: a rank reads its local block's input
rows itself (``read``: the default on CPU ranks, where the host table is the ranks' own memory
and a shuffle would cost the same gather plus a wait on the peer), or loads only the rows it
owns (its cache, or the host when no rank caches them) and shuffles them to the ranks that need
them (``shuffle``: GSplit's, the default on accelerators). Then per layer it shuffles hidden rows
to the ranks whose destinations need them (:mod:`gnnscale.deps.shuffle`; a layer where no rank
receives a row, e.g. because the hybrid cost model recomputes them all, is not shuffled at all)
and runs the unmodified conv layer on its local block. The loss
of a rank's own targets is divided by the mini-batch size and parameter gradients are
sum-all-reduced, so a step equals one process training on the whole mini-batch.

On a typed graph (a typed model, ``model=rgcn``) the store gathers a rank's loaded layer-0
rows as :class:`~gnnscale.sampling.base.TypedInputs` and :meth:`SplitParallel.forward` encodes
them first (``model.encode``: per-type linear maps, featureless types' embedding rows), so
each input row is encoded once, by the rank that loads it, and every shuffle carries dense rows
as on a homogeneous graph; a received layer-0 row's gradient travels back to its loader and
into its encoder (the shuffle's backward). The local blocks carry the sample's ``e_id`` and
``edge_type`` (the native split says where each local edge came from), so a typed conv reads
its relations and a model that reads edge features gets each local block's ``edge_attr``,
gathered by its edge ids on the rank that computes it (:mod:`gnnscale.cache.edges`,
``bytes_edge_features``). Embedding tables (sparse gradients) stay out of the summed
all-reduce: their gradients are all-gathered and summed
(:func:`gnnscale.distributed.sparse.reduce_sparse`), as the dense ones are summed.

``deps=hybrid`` (the default) lets a rank recompute a remote hidden row instead of receiving
it when the probed cost model says so, and a layer's whole rest of them when that costs less
than shuffling them plus the layer's two exchanges (the probed ``t_sync`` each);
``preaggregate`` makes senders average their edges into each remote destination (exact for
SAGE with mean/sum aggregation).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import torch
import torch.distributed as dist

from gnnscale.cache.edges import EdgeFeatures
from gnnscale.cache.store import build_feature_store
from gnnscale.deps.shuffle import ShuffleStats, shuffle
from gnnscale.distributed.collectives import new_group, sum_gradients
from gnnscale.distributed.device import Purpose, is_accelerator
from gnnscale.distributed.sparse import reduce_sparse, table_stats
from gnnscale.optim.base import sparse_parameters
from gnnscale.sampling import codec
from gnnscale.sampling.base import MiniBatch
from gnnscale.sampling.prefetch import Prefetcher
from gnnscale.sampling.schedule import Draw
from gnnscale.strategies.base import RunContext, SamplingStrategy, dropout_step_key
from gnnscale.strategies.split.config import SplitParallelConfig
from gnnscale.strategies.split.splitter import (
    LayerPlan,
    SplitPlan,
    pack_plan,
    split_sample,
    split_sample_all,
    unpack_plan,
)


def broadcast_sample(mb: MiniBatch | None, num_layers: int, group: dist.ProcessGroup | None = None
                     ) -> tuple[MiniBatch, int]:
    """Rank 0's sample on every rank: the mini-batch codec's header, then its body; returns it
    and the bytes broadcast (header and body: edge ids and types included when it has
    them)."""
    if dist.get_rank() == 0:
        header, body = codec.encode(mb)
    else:
        header = torch.empty(codec.header_size(num_layers), dtype=torch.int64)
    dist.broadcast(header, 0, group=group)
    if dist.get_rank() != 0:
        body = torch.empty(codec.body_size(header), dtype=torch.int64)
    dist.broadcast(body, 0, group=group)
    nbytes = (header.numel() + body.numel()) * body.element_size()
    if dist.get_rank() == 0:
        return mb, nbytes
    return codec.decode(header, body), nbytes


def _as_words(part: torch.Tensor) -> torch.Tensor:
    """An int32 or int64 tensor as int64 words: a leading dtype word, then the data (int32
    pairs packed two to a word, padded to even length); nothing for an empty part."""
    if part.numel() == 0:
        return part.long()
    if part.dtype == torch.int64:
        return torch.cat([torch.tensor([64]), part])
    if part.numel() % 2:
        part = torch.cat([part, part.new_zeros(1)])
    return torch.cat([torch.tensor([32]), part.view(torch.int64)])


def _from_words(words: torch.Tensor) -> torch.Tensor:
    """The tensor :func:`_as_words` packed (int32 padding is harmless: lengths are in it)."""
    body = words[1:]
    return body if int(words[0]) == 64 else body.view(torch.int32)


class SplitParallel(SamplingStrategy):
    """Every rank trains its split of one shared mini-batch sample (see the module docstring)."""

    schema = SplitParallelConfig
    #: the local blocks' edge feature gatherer (None: the model reads none)
    edges: EdgeFeatures | None = None

    def __init__(self, ctx: RunContext, batch_size: int = 1024, prefetch: int = 2,
                 preaggregate: bool = False, sample_workers: int = 0,
                 sample_on: str = "all", inputs: str = "auto") -> None:
        super().__init__(ctx, batch_size, prefetch, sample_workers)
        # one sample per step, of the whole mini-batch (slot 0), still a target per rank
        self.schedule = self.schedule.replace(slots=1, min_size=ctx.topo.world_size)
        SplitParallelConfig(sample_on=sample_on, inputs=inputs,
                            preaggregate=preaggregate).check()
        self.sample_on = sample_on
        self.inputs = inputs
        #: whether each rank reads its local block's input rows itself (set in setup)
        self.reads_inputs = False
        self.received_bytes = 0
        self._pool_feed: Any = None
        self.preagg = preaggregate
        self.gcn_block = ctx.model.spec().block_degrees  # the schema's answer

    # -- setup -------------------------------------------------------------------------------
    def setup(self) -> None:
        """Model, optimizer, feature store, partition book and the sample group."""
        ctx, topo = self.ctx, self.ctx.topo
        world, n = topo.world_size, ctx.graph.num_nodes
        self._module = ctx.model.to(topo.device)
        self._optimizer = ctx.optim(self._module)
        #: embedding tables with sparse gradients: summed by reduce_sparse, the rest all-reduced
        self._sparse = sparse_parameters(self._module)
        sparse = {id(p) for p in self._sparse}
        self._dense = [p for p in self._module.parameters() if id(p) not in sparse]
        self.edges = EdgeFeatures(ctx.graph, topo.device) \
            if getattr(ctx.model, "reads_edge_features", False) else None
        # samples are broadcast on a gloo group of their own (on the host, under nccl too)
        self.sample_group = new_group(purpose=Purpose.host) if world > 1 else None
        self.own_part = (self.partition_book("edge_cut").part.int() if world > 1
                         else torch.zeros(n, dtype=torch.int32))
        part = self.own_part if ctx.cache_policy.placement == "partitioned" else None
        # a rank loads only rows it caches or no rank caches: never a peer's (fetch_remote)
        self.store = build_feature_store(
            ctx.graph, ctx.cache_policy, topo=topo, device=topo.device,
            schedule=self.schedule, sampler=ctx.sampler, part=part, seed=ctx.seed,
            fetch_remote=False,
        )
        # layer-0 owner: the rank caching the feature, else the partition owner
        self.own_in = self.own_part  # the same tensor: one owner lookup per split
        if getattr(self.store, "owner", None) is not None:  # a typed store has none
            cached = self.store.owner.cpu()
            self.own_in = torch.where(cached >= 0, cached, self.own_part).int()
        self.reads_inputs = self._reads_inputs()
        self.labels = ctx.graph.y
        self.stats = ShuffleStats()
        self.allreduce_seconds, self.allreduce_bytes = 0.0, 0
        dims = self._dims()
        row_bytes = 4 * max(dims[1:] or [1])
        self.budget = ctx.deps.replication_budget(row_bytes) if world > 1 else 0
        self.costs = None
        if self.budget > 0:
            # the planning interface fullgraph calls too; edges priced as the model runs them
            ctx.deps.prepare(group=None, sparse=getattr(self._module, "sparse_conv", True))
            self.costs = ctx.deps.replication_costs(dims)
            if self.reads_inputs:  # a replica's missing input is read (one pass over the
                # row, a third of an edge's three), not shuffled
                self.costs[0] = self.costs[len(dims)] / 3
        if topo.rank == 0 or self.parallel:  # the ranks that sample
            self.start_sampler_pool()

    def _reads_inputs(self) -> bool:
        """``strategy.inputs`` resolved: ``auto`` reads where the ranks are CPU processes whose
        host tier holds every row (a row costs one gather either way, and a shuffle adds a
        wait on the peer), without pre-aggregation (which ships averaged input rows);
        elsewhere (accelerators: the host link is the bottleneck, GSplit's case) it shuffles.
        ``read`` on a part's rows only is refused before the ranks start."""
        if self.inputs != "auto":
            if self.inputs == "read" and not self.store.whole_table:
                raise ValueError("strategy.inputs=read needs the whole feature table on "
                                 "every host: set strategy.inputs=shuffle")
            return self.inputs == "read"
        return (not self.preagg and not is_accelerator(self.ctx.topo.device)
                and self.store.whole_table)

    def input_ids(self, plan: SplitPlan) -> torch.Tensor:
        """Global ids of the layer-0 rows this rank reads for ``plan``: its local block's
        sources in block order (:attr:`reads_inputs`), else the rows it owns and loads."""
        return plan.layers[0].block.src_ids if self.reads_inputs else plan.loaded_ids

    @property
    def parallel(self) -> bool:
        """Whether every rank samples and splits its share of the steps."""
        return self.sample_on == "all" and self.ctx.topo.world_size > 1

    def _dims(self) -> list[int]:
        """Row widths of layers 0..L: the inputs, then each layer's output."""
        return self._module.widths(self.ctx.graph.num_features)

    # -- one step ----------------------------------------------------------------------------
    def sample(self, draw: Draw) -> MiniBatch:
        """The shared sample of one step (collective: rank 0 samples, the others receive)."""
        ctx = self.ctx
        mb = None
        if ctx.topo.rank == 0 and self._pool_feed is not None:
            mb, _ = next(self._pool_feed)  # the pool yields the epoch's jobs in step order
        elif ctx.topo.rank == 0:
            mb = ctx.sampler.sample(ctx.graph, draw.seeds, draw.sample_seed)
        if ctx.topo.world_size == 1:
            return mb
        mb, nbytes = broadcast_sample(mb, ctx.sampler.num_layers, self.sample_group)
        if ctx.topo.rank != 0:
            self.received_bytes += nbytes
        return mb

    def split(self, mb: MiniBatch) -> SplitPlan:
        """The native split of one shared sample into this run's per-rank plans."""
        topo = self.ctx.topo
        return split_sample(mb, self.own_in, self.own_part, topo.world_size, topo.rank,
                            preagg=self.preagg, costs=self.costs, budget=self.budget,
                            gcn_block_norm=self.gcn_block, edge_ids=True,
                            read_inputs=self.reads_inputs)

    def prepare(self, draw: Draw) -> tuple[MiniBatch, SplitPlan, float]:
        """Sample (or receive) and split one step; returns the split's seconds too."""
        mb = self.sample(draw)
        t0 = time.perf_counter()
        plan = self.split(mb)
        return mb, plan, time.perf_counter() - t0

    def prepare_round(self, draws: list[Draw]) -> list[tuple[SplitPlan, float, float]]:
        """A round of at most ``world`` consecutive steps of an epoch (parallel
        split-samplers): this rank samples the round's ``rank``-th step and splits it for every
        rank, one all-to-all hands each rank its parts; returns, in step order, ``(this rank's
        plan, sampling seconds, split seconds)`` (the seconds are this rank's own, on the step
        it sampled)."""
        ctx, world, rank = self.ctx, self.ctx.topo.world_size, self.ctx.topo.rank
        parts = [torch.empty(0, dtype=torch.int64)] * world
        own = None  # this rank's plan of the step it split: kept as it is, never packed
        t_sample = t_split = 0.0
        if rank < len(draws):
            t0 = time.perf_counter()
            if self._pool_feed is not None:
                mb, _ = next(self._pool_feed)  # this rank's steps, in order
            else:
                mb = ctx.sampler.sample(ctx.graph, draws[rank].seeds, draws[rank].sample_seed)
            t1 = time.perf_counter()
            plans = split_sample_all(
                mb, self.own_in, self.own_part, world, preagg=self.preagg, costs=self.costs,
                budget=self.budget, gcn_block_norm=self.gcn_block, edge_ids=True,
                read_inputs=self.reads_inputs)
            own = plans[rank]
            parts = [torch.empty(0, dtype=torch.int64) if q == rank else pack_plan(plan)
                     for q, plan in enumerate(plans)]
            t_sample, t_split = t1 - t0, time.perf_counter() - t1
            self.visited(mb.input_nodes)  # each sample counted once, by the rank drawing it
        # 8-byte words on the wire: int32 parts travel two to a word (odd lengths padded)
        words = [_as_words(p) for p in parts]
        sizes = torch.tensor([w.numel() for w in words], dtype=torch.int64)
        got = torch.empty(world, dtype=torch.int64)
        dist.all_to_all_single(got, sizes, group=self.sample_group)
        recv = torch.empty(int(got.sum()), dtype=torch.int64)
        dist.all_to_all_single(recv, torch.cat(words), got.tolist(), sizes.tolist(),
                               group=self.sample_group)
        mine = got.tolist()
        self.received_bytes += sum(mine) * recv.element_size()  # what crossed the wire
        plans = [own if q == rank else unpack_plan(_from_words(b)) if b.numel() else None
                 for q, b in enumerate(torch.split(recv, mine))]
        return [(plan, t_sample if i == rank else 0.0, t_split if i == rank else 0.0)
                for i, plan in enumerate(plans) if plan is not None]

    def load(self, mb: MiniBatch | None, plan: SplitPlan) -> Any:
        """This rank's raw layer-0 rows (a feature matrix, or typed inputs): its local block's
        sources (:attr:`reads_inputs`), else its cached ones and the ones no rank caches; when
        the model reads edge features, each local block's ``edge_attr`` is set too (by its
        edge ids)."""
        x = self.store.gather(self.input_ids(plan))
        if self.edges is not None:
            self.edges.attach([lp.block for lp in plan.layers])
        return x

    def forward(self, x: Any, plan: SplitPlan) -> torch.Tensor:
        """Encode the loaded raw rows (``model.encode``), then shuffle + local conv per
        layer; returns the rows of this rank's targets."""
        world = self.ctx.topo.world_size
        h = self._module.encode(x)
        dev = h.device
        for i, lp in enumerate(plan.layers):
            if i == 0 and self.reads_inputs:
                xi = h  # the block's sources, read in block order
            else:
                xi = self._sources(h, lp, world)
            if lp.scale is not None:
                xi = xi * lp.scale.to(dev)[:, None]
            h = self._module.layer(i, xi, lp.block.to(dev))
        return h

    def _sources(self, h: torch.Tensor, lp: LayerPlan, world: int) -> torch.Tensor:
        """Layer ``lp``'s local source rows from this rank's rows ``h``: pre-aggregated slots
        appended, the shuffle's received rows after them (a layer where no rank receives a
        row is not shuffled), gathered into block order."""
        dev = h.device
        src = h
        if lp.slot_count.numel():
            agg = h.new_zeros(lp.slot_count.numel(), h.shape[1]).index_add(
                0, lp.agg_slot.to(dev), h[lp.agg_row.to(dev)])
            src = torch.cat([h, agg / lp.slot_count.to(dev, h.dtype)[:, None]])
        if world > 1 and lp.moves:
            recv = shuffle(src, lp.send_idx, lp.send_counts, lp.recv_counts, stats=self.stats)
            src = torch.cat([h, recv])
        return src[lp.gather.to(dev)]

    def step(self, epoch: int, index: int) -> float:
        """One whole step inline (sample or receive, split, load, train); returns the loss of
        the whole mini-batch. Collective."""
        draw = self.schedule.draw(epoch, index, 0)
        mb, plan, _ = self.prepare(draw)
        self.last_plan = plan
        return self.train_step(mb, plan, self.load(mb, plan), draw)

    def train_step(self, mb: MiniBatch | None, plan: SplitPlan, x: torch.Tensor,
                   draw: Draw | None = None) -> float:
        """Forward, backward, summed gradient all-reduce and optimizer step; returns the loss
        of the whole mini-batch (the same on every rank). ``draw``: the task's loss of its
        items from the rows each rank owns (without it: the loss of the plan's own targets,
        node classification). Dropout is keyed by (seed, the draw's step, layer, global vertex
        id: :func:`dropout_step_key`; without a draw, step 0 of epoch 0), so each rank, and a
        rank recomputing a remote row, draws the mask one process draws for it."""
        self._module.train()
        self._optimizer.zero_grad(set_to_none=True)
        key = dropout_step_key(draw.epoch, draw.step) if draw is not None else 0
        self._module.set_dropout_key(self.ctx.seed, key)
        try:
            out = self.forward(x, plan)
        finally:  # the backward recomputes masks from the keys its forward recorded
            self._module.set_dropout_key(None)
        task = self.ctx.task
        loss = task.sharded_loss(out, plan.target_ids, draw.items, draw.epoch, self.group) \
            if draw is not None else task.loss(out, task.target(plan.target_ids, 0),
                                               total=plan.num_targets)
        loss.backward()
        total = self.allreduce_grads(loss.detach())
        self._optimizer.step()
        return total

    def allreduce_grads(self, loss: torch.Tensor) -> float:
        """Sum every dense parameter gradient (and the loss) over ranks in one flat buffer,
        and every sparse one (embedding tables: each rank's looked-up rows) by all-gathers: a
        rank's loss is its share of the mini-batch's, so the sums are the whole batch's."""
        t0 = time.perf_counter()
        total, nbytes = sum_gradients(self._dense, loss)
        if self._sparse and self.ctx.topo.world_size > 1:
            nbytes += reduce_sparse(self._sparse, mean=False)
        if nbytes:
            self.allreduce_seconds += time.perf_counter() - t0
            self.allreduce_bytes += nbytes
        return total

    # -- epoch -------------------------------------------------------------------------------
    def train_epoch(self, epoch: int, progress: Any = None) -> dict[str, float]:
        """Every shared mini-batch of ``epoch``: split, load owned rows, shuffle, train."""
        ctx, world = self.ctx, self.ctx.topo.world_size
        jobs = list(self.schedule.draws(epoch))
        m = dict.fromkeys(("sample_time", "split_time", "load_time", "compute_time",
                           "train_loss", "edges_computed", "nodes_loaded", "steps",
                           "replicated_rows", "edge_ratio_sum"), 0.0)
        per_rank = [0] * world
        self.received_bytes = 0
        self.stats.reset()
        self.allreduce_seconds, self.allreduce_bytes = 0.0, 0
        self.store.reset_epoch()
        if self.edges is not None:
            self.edges.reset_epoch()
        if self.pool is not None:  # the steps this rank samples, in order
            mine = [d for d in jobs if not self.parallel or d.step % world == ctx.topo.rank]
            self._pool_feed = self.pool.map([(d.seeds, d.sample_seed) for d in mine])
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
        m["bytes_sample_received"] = float(self.received_bytes)
        m.update(self.store.epoch_stats())
        if self.edges is not None:
            m.update(self.edges.epoch_stats())
        m.update(table_stats(self._sparse))
        return m

    def _run_steps(self, jobs: list, m: dict[str, float], per_rank: list[int],
                   progress: Any) -> None:
        """Train ``jobs`` in order, adding to the metrics ``m`` and the per-rank edges; the
        disk rows of the next ``cache.disk_ahead`` plans are read while a step computes
        (:meth:`FeatureStore.read_ahead`: the plans are split ahead, so each rank knows the
        rows it will load)."""
        plans = self.store.read_ahead(self._plans(jobs), key=lambda item: self.input_ids(item[0]))
        with closing(plans) as feed:
            self._train_plans(jobs, feed, m, per_rank, progress)

    def _train_plans(self, jobs: list, feed: Iterator, m: dict[str, float], per_rank: list[int],
                     progress: Any) -> None:
        for job, (plan, t_sample, t_split) in zip(jobs, feed):
            m["sample_time"] += t_sample
            m["split_time"] += t_split
            t0 = time.perf_counter()
            x = self.load(None, plan)
            t1 = time.perf_counter()
            m["train_loss"] += self.train_step(None, plan, x, job)
            m["load_time"] += t1 - t0
            m["compute_time"] += time.perf_counter() - t1
            m["edges_computed"] += plan.edges_per_rank[self.ctx.topo.rank]
            m["nodes_loaded"] += self.input_ids(plan).numel()
            m["replicated_rows"] += plan.replicated
            m["edge_ratio_sum"] += plan.local_edges / max(plan.total_edges, 1)
            for r, e in enumerate(plan.edges_per_rank):
                per_rank[r] += e
            m["steps"] += 1
            if progress is not None:
                progress.update(1)

    def _plans(self, jobs: list) -> Iterator[tuple[SplitPlan, float, float]]:
        """``(plan, sampling seconds, split seconds)`` of every step in order, prepared
        ``prefetch`` steps (or rounds) ahead: rounds of parallel split-samplers, or the
        leader's broadcast samples split here."""
        if self.parallel:
            world = self.ctx.topo.world_size
            rounds = [jobs[s:s + world] for s in range(0, len(jobs), world)]
            with closing(iter(Prefetcher(self.prepare_round, rounds, self.prefetch))) as feed:
                for steps, _ in feed:
                    yield from steps
            return
        with closing(iter(Prefetcher(self.prepare, jobs, self.prefetch))) as feed:
            for (mb, plan, t_split), t_prep in feed:
                self.visited(mb.input_nodes)  # every rank: the same sample (same ranking)
                yield plan, t_prep - t_split, t_split
