"""Data parallelism (DGL/PyG, PaGraph, Quiver): DepCache semantics.

Each step cuts the global mini-batch into one micro-batch per rank; a rank samples its own
k-hop blocks (ahead of compute, in a background thread, or in ``strategy.sample_workers``
sampler processes of its own), gathers their input features through the feature store (and,
for a model that reads edge features, each block's ``edge_attr`` by its edge ids:
:mod:`gnnscale.cache.edges`, ``bytes_edge_features``), and runs forward/backward under
DistributedDataParallel; gradients are
all-reduced (averaged), so a step equals one process averaging the micro-batch losses.

On a typed graph the store gathers :class:`~gnnscale.sampling.base.TypedInputs` and the model
(a typed one, ``model=rgcn``) embeds featureless node types in sparse embedding tables, held
whole on every rank (``embedding_rows_held``, ``embedding_bytes``: the parameters; SparseAdam
keeps two moments of each as large again). DDP leaves those tables alone: after the backward
the ranks all-gather each table's sparse gradient (the rows they looked up and their
values), sum and average them, so each rank applies the same sparse step to the rows some
rank touched (``embedding_rows_touched``: distinct rows this rank's epoch looked up).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from contextlib import closing
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from gnnscale.cache.edges import EdgeFeatures, attach_host
from gnnscale.cache.store import build_feature_store, owner_rows, typed_inputs
from gnnscale.distributed import device as device_seam
from gnnscale.distributed.collectives import group_size
from gnnscale.distributed.sparse import reduce_sparse, table_stats
from gnnscale.optim.base import sparse_parameters
from gnnscale.sampling.base import MiniBatch
from gnnscale.sampling.prefetch import Prefetcher
from gnnscale.sampling.schedule import Draw
from gnnscale.strategies.base import RunContext, SamplingStrategy
from gnnscale.strategies.data.config import DataParallelConfig

if TYPE_CHECKING:
    from gnnscale.distributed.topology import Topology


class _CommTimer:
    """DDP comm hook state: seconds from all-reduce launch to completion, bytes reduced;
    ``group`` is the process group the gradients are averaged over (None: the world)."""

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        self.seconds = 0.0
        self.bytes = 0
        self.group = group


def _timed_allreduce(state, bucket):
    """DDP comm hook: average the bucket over ranks and time the all-reduce."""
    buf = bucket.buffer()
    state.bytes += buf.numel() * buf.element_size()
    t0 = time.perf_counter()
    buf.div_(dist.get_world_size(state.group))
    fut = dist.all_reduce(buf, group=state.group, async_op=True).get_future()

    def done(f):
        state.seconds += time.perf_counter() - t0
        return f.value()[0]

    return fut.then(done)


# DDP checks the hook's annotations as objects (this module uses postponed annotations).
_timed_allreduce.__annotations__ = {"state": object, "bucket": dist.GradBucket,
                                    "return": torch.futures.Future[torch.Tensor]}


class DataParallel(SamplingStrategy):
    """Each rank trains its own micro-batch of every global mini-batch; gradients all-reduced."""

    schema = DataParallelConfig
    #: the blocks' edge feature gatherer of a training rank (None: the model reads none)
    edges: EdgeFeatures | None = None

    def __init__(self, ctx: RunContext, batch_size: int = 1024, prefetch: int = 2,
                 sample_workers: int = 0) -> None:
        super().__init__(ctx, batch_size, prefetch, sample_workers)
        self.hotness: torch.Tensor | None = None  # cache ranking computed elsewhere (factored)
        self.slot = ctx.topo.rank  # this rank's micro-batch of each step (its training rank)

    def setup(self) -> None:
        """Model under DDP, optimizer and feature store on every rank."""
        self.setup_training(self.ctx.topo)

    def setup_training(self, topo: Topology) -> None:
        """Model (under DDP on :attr:`group` when ``topo`` has several ranks), optimizer and
        feature store; ``topo`` holds the rank and size of the training ranks (``factored``
        trains on some ranks only)."""
        ctx = self.ctx
        self.slot = topo.rank
        model = ctx.model.to(topo.device)
        self._module = model
        self.comm = _CommTimer(self.group)
        #: embedding tables with sparse gradients: reduced by :meth:`reduce_sparse`, not DDP
        self._sparse = sparse_parameters(model)
        if topo.world_size > 1:
            if self._sparse:
                skip = {id(p) for p in self._sparse}
                DDP._set_params_and_buffers_to_ignore_for_model(
                    model, [n for n, p in model.named_parameters() if id(p) in skip])
            model = DDP(model, device_ids=device_seam.ddp_device_ids(topo.device),
                        process_group=self.group)
            model.register_comm_hook(self.comm, _timed_allreduce)
        self.model = model
        self._optimizer = ctx.optim(self._module)
        part = None
        if ctx.cache_policy.placement == "partitioned":
            part = self.partition_book("edge_cut").part
        self.store = build_feature_store(
            ctx.graph, ctx.cache_policy, topo=topo, device=topo.device,
            schedule=self.schedule, sampler=ctx.sampler, part=part, seed=ctx.seed,
            peak_bytes=self.step_peak_bytes(), hotness=self.hotness, group=self.group,
        )
        #: the blocks' edge features, gathered beside the node features (None: not read)
        self.edges = EdgeFeatures(ctx.graph, topo.device) \
            if getattr(ctx.model, "reads_edge_features", False) else None
        self.labels = ctx.graph.y
        self.start_sampler_pool()

    def gather(self, mb: MiniBatch) -> Any:
        """What the model reads of ``mb`` besides its blocks: the input rows from the feature
        store (a feature matrix, or typed inputs; collective when the store is); when the
        model reads edge features, each block's ``edge_attr`` is set too (by its edge ids)."""
        x = self.store.gather(mb.input_nodes)
        if self.edges is not None:
            self.edges.attach(mb.blocks)
        return x

    def step_peak_bytes(self) -> int | None:
        """For ``cache.auto`` on CUDA: peak device memory of one measured training step.

        Runs forward and backward of the first micro-batch (features straight from the host)
        without an optimizer step, then clears the gradients (PaGraph/GNNLab's method).
        """
        ctx, dev = self.ctx, self.ctx.topo.device
        if not getattr(ctx.cache_policy, "auto", False) or not device_seam.is_accelerator(dev):
            return None  # no measurement needed (or cache.auto refuses a non-CUDA device)
        first = self.schedule.draw(0, 0, self.slot)
        mb = self.sample(first)
        device_seam.reset_peak(dev)
        x = self.host_gather(mb).to(dev)
        out = self._module(x, [b.to(dev) for b in mb.blocks])
        ctx.task.loss(out, first.target.to(dev)).backward()
        peak = device_seam.peak_allocated(dev)
        self._module.zero_grad(set_to_none=True)
        del x, out
        device_seam.release_cached(dev)
        return peak

    def sample(self, draw: Draw) -> MiniBatch:
        """The sample of one draw of the schedule (the seeds the task needs for its items)."""
        return self.ctx.sampler.sample(self.ctx.graph, draw.seeds, draw.sample_seed)

    def samples(self, jobs: list[Draw]) -> Iterable:
        """``(MiniBatch, sampling seconds)`` of ``jobs`` in order: from the sampler processes
        when there are any, else from the prefetch thread (the same draws either way)."""
        if self.pool is None:
            return Prefetcher(self.sample, jobs, self.prefetch)
        return self.pool.map([(d.seeds, d.sample_seed) for d in jobs])

    def step(self, epoch: int, index: int) -> float:
        """One whole step inline (sample this rank's micro-batch of step ``index``, gather,
        train); returns the loss. Collective (gradient all-reduce)."""
        draw = self.schedule.draw(epoch, index, self.slot)
        mb = self.sample(draw)
        x = self.gather(mb)
        return self.train_step(mb, x, draw.target.to(x.device))

    def train_step(self, mb: MiniBatch, x: Any, y: Any) -> float:
        """Forward, backward (gradients all-reduced by DDP, sparse ones by
        :meth:`reduce_sparse`) and optimizer step; returns the loss. ``x`` is what the store
        gathered (a feature matrix, or typed inputs); ``y`` is the task's target of the
        micro-batch (node classification: labels)."""
        self.model.train()
        self._optimizer.zero_grad(set_to_none=True)
        out = self.model(x, [b.to(x.device) for b in mb.blocks])
        loss = self.ctx.task.loss(out, y)
        loss.backward()
        if self._sparse and group_size(self.group) > 1:
            self.reduce_sparse()
        self._optimizer.step()
        return float(loss.detach())

    def reduce_sparse(self) -> None:
        """Average every sparse gradient over the ranks (collective,
        :func:`gnnscale.distributed.sparse.reduce_sparse`: each rank's looked-up rows and their
        gradient rows, every table's in one pair of all-gathers)."""
        t0 = time.perf_counter()
        self.comm.bytes += reduce_sparse(self._sparse, self.group)
        self.comm.seconds += time.perf_counter() - t0

    def embedding_stats(self) -> dict[str, float]:
        """Rows and bytes of the sparse embedding tables this rank holds (none: empty)."""
        return table_stats(self._sparse)

    def train_epoch(self, epoch: int, progress: Any = None) -> dict[str, float]:
        """Every global mini-batch of ``epoch``: sample, gather, train this rank's share."""
        topo = self.ctx.topo
        jobs = list(self.schedule.draws(epoch, slots=[self.slot]))
        m = dict.fromkeys(("sample_time", "load_time", "compute_time", "train_loss",
                           "edges_computed", "nodes_loaded", "steps"), 0.0)
        self.comm.seconds, self.comm.bytes = 0.0, 0
        self.store.reset_epoch()
        self.reset_edges()
        t_epoch = time.perf_counter()
        with closing(iter(self.store.read_ahead(self.samples(jobs)))) as feed:
            for draw, (mb, t_sample) in zip(jobs, feed):
                m["sample_time"] += t_sample
                t0 = time.perf_counter()
                x = self.gather(mb)
                y = device_seam.to_device(draw.target, topo.device)
                t1 = time.perf_counter()
                m["train_loss"] += self.train_step(mb, x, y)
                m["load_time"] += t1 - t0
                m["compute_time"] += time.perf_counter() - t1
                m["edges_computed"] += mb.num_edges
                m["nodes_loaded"] += mb.input_nodes.numel()
                self.visited(mb.input_nodes)
                m["steps"] += 1
                if progress is not None:
                    progress.update(1)
        m["epoch_time"] = time.perf_counter() - t_epoch
        m["train_loss"] /= max(m["steps"], 1)
        m["comm_time"] = self.comm.seconds
        m["bytes_allreduce"] = float(self.comm.bytes)
        m.update(self.store.epoch_stats())
        m.update(self.embedding_stats())
        m.update(self.edge_stats())
        return m

    def host_gather(self, mb: MiniBatch) -> torch.Tensor:
        """``mb``'s input rows straight from the host table, on the host (a rank that trains
        without a feature store: a factored sampler as a standby trainer; collective from
        parts, where rows of other parts come from their owners); each block's
        ``edge_attr`` too when the model reads edge features; a typed graph's typed inputs."""
        if getattr(self.ctx.model, "reads_edge_features", False):
            attach_host(self.ctx.graph, mb.blocks)
        graph = self.ctx.graph
        if getattr(graph.x, "held", None) is not None:  # parts=: the others' rows from owners
            return owner_rows(graph.x, mb.input_nodes, self.group)
        return typed_inputs(graph, mb.input_nodes) if graph.is_typed else graph.x[mb.input_nodes]

    def reset_edges(self) -> None:
        """Zero the edge feature counters (an epoch starts)."""
        if self.edges is not None:
            self.edges.reset_epoch()

    def edge_stats(self) -> dict[str, float]:
        """``bytes_edge_features`` of the epoch (none when the model reads no edge
        features)."""
        return {} if self.edges is None else self.edges.epoch_stats()
