"""Full-graph training from host memory (HongTu): vertex data stays on the host, chunks of it
visit the device.

Every rank owns one part of an edge-cut book (its masters); each part is cut into ``chunks``
chunks and batch ``b`` runs one chunk of every part at once (:mod:`.chunks`).
Every layer's rows and gradients live in host buffers (:class:`~.tiers.HostStore`).
Forward, layer by layer, batch by batch: the owners load the rows the batch reads
(deduplicated per ``dedup``, :mod:`.transfers`), share them over the Shuffle,
each rank computes its chunk and writes the outputs back to the host. The loss is the task's,
from the top rows of the rank's masters (node classification: the summed cross-entropy of its
training vertices over the global training-set size). Backward,
from the top layer down, batch by batch (Algorithm 1): reload the inputs and recompute, or
reload the cached aggregate and recompute only the update (``intermediate``), backpropagate the
destinations' gradients, and send the sources' gradients back to their owners' host buffers.
One parameter all-reduce per epoch, so an epoch equals one process training on the whole graph.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from gnnscale.deps.shuffle import ShuffleStats, shuffle
from gnnscale.distributed.collectives import sum_gradients
from gnnscale.errors import ConfigError
from gnnscale.sampling.base import Block
from gnnscale.strategies.base import RunContext, Strategy
from gnnscale.strategies.offload import compute
from gnnscale.strategies.offload.bound import layer_bound
from gnnscale.strategies.offload.chunks import Chunking, two_level
from gnnscale.strategies.offload.config import OffloadConfig, check_options
from gnnscale.strategies.offload.memory import ActivationModel
from gnnscale.strategies.offload.tiers import DeviceTier, HostStore, TransferStats
from gnnscale.strategies.offload.transfers import BatchTransfer, plan_transfers

GB = 1e9
_ACTIVATIONS: dict[tuple, ActivationModel] = {}  # per layer architecture, fitted once


class Offload(Strategy):
    """One offloaded full-graph epoch per ``train_epoch``; see the module docstring."""

    schema = OffloadConfig

    def __init__(self, ctx: RunContext, chunks: int = 8, dedup: str = "inter+intra",
                 reorganize: bool = False, intermediate: str = "auto",
                 device_budget_gb: float | None = None, level2: str = "range") -> None:
        super().__init__(ctx)
        check_options(chunks, dedup, intermediate, device_budget_gb, ctx.model, level2)
        self.chunks, self.dedup, self.reorganize = chunks, dedup, reorganize
        self.level2 = level2
        self.intermediate, self.budget_gb = intermediate, device_budget_gb

    @classmethod
    def check_built(cls, cfg, built) -> None:
        """``strategy.device_budget_gb``: plan every rank's chunks here, in the launcher, and
        refuse a budget below the largest device bound, naming the smallest that works (the
        graph loaded, the model and deps manager built)."""
        if cfg.strategy.get("device_budget_gb") is None:
            return
        import copy
        from pathlib import Path

        from gnnscale import registry
        from gnnscale.distributed.launch import private_temp_dir
        from gnnscale.distributed.topology import Topology
        from gnnscale.partition.provider import CachedPartitions

        graph = built.loaded if built.loaded is not None else registry.build(cfg.dataset).load()
        with private_temp_dir():  # PyG writes its generated modules to the temp folder
            model = registry.build(cfg.model, in_channels=graph.num_features,
                                   out_channels=graph.num_classes)
        deps = registry.build(cfg.deps)
        world = cfg.dist.world_size
        partitions = CachedPartitions(graph, cfg.partitioner,
                                      Path(cfg.data_root) / "partitions", log=None)
        worst = None
        for rank in range(world):
            topo = Topology(rank, world, rank, world, torch.device("cpu"))
            ctx = RunContext(topo=topo, graph=graph, model=copy.deepcopy(model),
                             sampler=None, cache_policy=None, deps=deps,
                             partition=partitions, optim=registry.build(cfg.optim),
                             seed=cfg.seed)
            plan = registry.build(cfg.strategy, ctx=ctx)
            plan.plan()
            if worst is None or plan.bound > worst.bound:
                worst = plan
        worst._check_budget(need=worst.bound)

    # -- setup -------------------------------------------------------------------------------
    def setup(self) -> None:
        """Plan, then the host store and device tier of this rank's part."""
        self.plan()
        graph, topo = self.ctx.graph, self.ctx.topo
        self.stats = TransferStats()
        self.shuffle_stats = ShuffleStats()
        self.tier = DeviceTier(self.device, self.stats)
        self.store = HostStore(graph.x[self.masters], self.dims, self.device.type == "cuda")
        n = self.masters.numel()
        self.agg_host = [torch.empty(n, self.dims[k]) if c.mode == "cache" else None
                         for k, c in enumerate(self.choices)]
        self._check_budget()
        self.alpha = self.chunking.replication(graph.num_nodes)
        if topo.rank == 0:
            print(self.describe(), flush=True)

    def plan(self) -> None:
        """This rank's chunks, transfers, per-layer recompute/cache choices and device bound
        (no buffers allocated, no collective: the launcher plans every rank with it)."""
        ctx, topo = self.ctx, self.ctx.topo
        world, graph = topo.world_size, ctx.graph
        self.device = topo.device
        self._module = ctx.model.to(self.device)
        self._module.bind_graph(graph)
        self._optimizer = ctx.optim(self._module)
        t0 = time.perf_counter()
        book = ctx.partition.get(world, kind="edge_cut") if world > 1 else None
        part = book.part if book is not None else torch.zeros(graph.num_nodes,
                                                               dtype=torch.int64)
        self.part = part
        self.masters_all = [(part == p).nonzero().flatten() for p in range(world)]
        try:
            self.chunking: Chunking = two_level(graph, part, world, self.chunks,
                                                self.reorganize, self.level2)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        self.transfers = plan_transfers(self.chunking, part, self.masters_all, topo.rank,
                                        self.dedup, graph)
        self.blocks = [Block(t.edge_index, (t.src_ids.numel(), t.dst.numel()), t.src_ids)
                       for t in self.transfers]
        self.dims = self._module.widths(graph.num_features)
        self.choices = [compute.choose(
            self._module, k, self.intermediate, self.dims[k],
            sum(t.dst.numel() for t in self.transfers),
            sum(t.rows_loaded + sum(t.recv_counts) for t in self.transfers),
            sum(b.num_edges for b in self.blocks)) for k in range(len(self.dims) - 1)]
        self.plan_time = time.perf_counter() - t0
        self.masters = self.masters_all[topo.rank]
        self.bound, self.bound_where = self._plan_bound()

    def _plan_bound(self) -> tuple[int, tuple[int, int]]:
        """The device bound (max over layers) and where it is reached (layer, batch)."""
        gen = torch.Generator().manual_seed(0)
        model = self._module
        was = model.training
        model.train()
        model.set_dropout_key(self.ctx.seed, 0)
        best, where = 0, (0, 0)
        whole = sum(self.masters_all[self.ctx.topo.rank].numel() * d * 4 for d in self.dims)
        edges = sum(b.num_edges for b in self.blocks)
        sources = torch.unique(torch.cat([t.src_ids for t in self.transfers])).numel()
        for k, c in enumerate(self.choices):
            d_in, d_out = self.dims[k], self.dims[k + 1]
            act = self._activations(k, c.mode, gen)
            b, i = layer_bound(self.transfers, d_in, d_out, c.mode == "cache", act)
            if b > best:
                best, where = b, (k, i)
            whole += self._activations(k, "recompute", gen)(
                edges, sources, self.masters_all[self.ctx.topo.rank].numel())
        #: modelled bytes of training the whole part on the device at once (all layers' saved
        #: tensors and rows): what plain full-graph training would hold
        self.whole_part_bytes = whole
        self._optimizer.zero_grad(set_to_none=True)
        model.train(was)
        return best, where

    def _activations(self, k: int, mode: str, gen: torch.Generator) -> ActivationModel:
        """The fitted saved-bytes model of layer ``k`` run in ``mode`` (cached per layer
        architecture: what autograd saves depends on the layer's shapes only)."""
        model, d_in, d_out = self._module, self.dims[k], self.dims[k + 1]
        key = (type(model).__name__, model.residual, repr(model.convs[k]), repr(model.norms[k])
               if k < model.num_layers - 1 else "last", model.dropout,
               model.input_dropout if k == 0 else 0.0, mode, d_in, d_out)
        if key not in _ACTIVATIONS:
            _ACTIVATIONS[key] = ActivationModel.fit(self._probe(k, mode == "cache", d_out), d_in,
                                                    self.ctx.graph.num_nodes, gen)
        return _ACTIVATIONS[key]

    def _probe(self, k: int, cache: bool, d_out: int):
        model = self._module

        def run(block: Block, x: torch.Tensor) -> int:
            grad = torch.randn(block.num_dst, d_out)
            if cache:
                return compute.backward_cached(model, k, x[: block.num_dst], x[: block.num_dst],
                                               block, grad, True)[1]
            return compute.backward_recompute(model, k, x, block, grad, True)[1]
        return run

    def _check_budget(self, need: int | None = None) -> None:
        """Refuse a plan whose device bound exceeds the budget; ``need`` is the smallest
        budget that fits every rank (the launcher's figure), else this rank's bound."""
        if self.budget_gb is None or self.bound <= self.budget_gb * GB:
            return
        need = self.bound if need is None else need
        k, i = self.bound_where
        fits = self._smallest_chunks()
        hint = (f"or use strategy.chunks={fits} (its bound fits)" if fits else
                "no chunk count fits this budget on this rank's part")
        raise ConfigError(
            f"strategy.device_budget_gb={self.budget_gb} ({int(self.budget_gb * GB)} bytes) is "
            f"smaller than the working set of one chunk plus the transition buffer: "
            f"{self.bound} bytes (layer {k}, batch {i}, strategy.chunks={self.chunks}). Raise "
            f"strategy.device_budget_gb to at least {need / GB:.4g}, {hint}")

    def _smallest_chunks(self) -> int | None:
        """The smallest doubling of ``chunks`` whose planned bound fits the budget."""
        ctx, budget = self.ctx, self.budget_gb * GB
        most = min(m.numel() for m in self.masters_all)
        chunks, saved = self.chunks, (self.chunks, self.chunking, self.transfers)
        try:
            while chunks < most:
                chunks = min(2 * chunks, most)
                self.chunks = chunks
                self.chunking = two_level(ctx.graph, self.part, ctx.topo.world_size, chunks,
                                          self.reorganize, self.level2)
                self.transfers = plan_transfers(self.chunking, self.part, self.masters_all,
                                                ctx.topo.rank, self.dedup, ctx.graph)
                if self._plan_bound()[0] <= budget:
                    return chunks
            return None
        finally:
            self.chunks, self.chunking, self.transfers = saved

    def describe(self) -> str:
        """The plan in a few lines (chunks, dedup, bound, per-layer choice)."""
        lines = [f"offload plan (rank 0): {self.chunks} chunks x {self.ctx.topo.world_size} "
                 f"parts, dedup={self.dedup}, reorganize={self.reorganize}, alpha="
                 f"{self.chunking.replication(self.ctx.graph.num_nodes):.3f}, planned in "
                 f"{self.plan_time:.3f}s; device bound {self.bound} bytes"
                 + (f" of budget {int(self.budget_gb * GB)}" if self.budget_gb else "")
                 + f" (the whole part at once: ~{self.whole_part_bytes} bytes, modelled)"]
        for k, c in enumerate(self.choices):
            lines.append(f"  layer {k}: {c.mode} (cache would move {c.cache_bytes} B, "
                         f"recompute {c.recompute_bytes} B)")
        return "\n".join(lines)

    # -- moving rows -------------------------------------------------------------------------
    def _fill(self, k: int, t: BatchTransfer, prev: torch.Tensor | None) -> torch.Tensor:
        """The batch's device buffer of layer-``k`` rows: reused rows, then loaded ones."""
        host = self.store.rows[k]
        if t.reuse_dst.numel() == 0:
            buf = self.tier.load(host, t.buffer)
        else:
            buf = torch.empty(t.buffer.numel(), host.shape[1], device=self.device)
            buf[t.reuse_dst] = prev[t.reuse_src]
            self.stats.reused += t.reuse_dst.numel() * host.shape[1] * 4
            self.stats.rows_reused += t.reuse_dst.numel()
            if t.load.numel():
                buf[t.load] = self.tier.load(host, t.buffer[t.load])
        return buf

    def _sources(self, k: int, t: BatchTransfer, prev: torch.Tensor | None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """(the batch's buffer, this rank's chunk sources assembled from it and peers)."""
        buf = self.tier.hold("buffer", self._fill(k, t, prev))
        self.tier.release("prev_buffer")
        recv = self.tier.hold("recv", self._exchange(buf, t.send_idx, t.send_counts,
                                                     t.recv_counts))
        src = self.tier.hold("src", torch.cat([buf, recv])[t.assemble.to(self.device)])
        self.tier.release("recv")
        return buf, src

    def _exchange(self, x: torch.Tensor, send_idx: torch.Tensor, send_counts: list[int],
                  recv_counts: list[int]) -> torch.Tensor:
        if self.ctx.topo.world_size == 1:
            return x[:0]
        before = self.shuffle_stats.bytes_sent
        with torch.no_grad():
            out = shuffle(x, send_idx, send_counts, recv_counts, self.group,
                          self.shuffle_stats)
        self.stats.rank_to_rank += self.shuffle_stats.bytes_sent - before
        return out

    def _send_back(self, k: int, t: BatchTransfer, grad_src: torch.Tensor,
                   carry: torch.Tensor | None) -> torch.Tensor | None:
        """Sources' gradients to their owners, summed into the buffer rows; rows the next
        batch holds again stay on the device (returned), the rest are added to the host."""
        nb, nr = t.buffer.numel(), sum(t.recv_counts)
        g = self.tier.hold("grad_rows", grad_src.new_zeros(nb + nr, grad_src.shape[1]))
        g.index_add_(0, t.assemble.to(self.device), grad_src)
        back = self.tier.hold("grad_back", self._exchange(
            g[nb:], torch.arange(nr), t.recv_counts, t.send_counts))
        gbuf = g[:nb]
        gbuf.index_add_(0, t.send_idx.to(self.device), back)
        self.tier.release("grad_back", "grad_src")
        if carry is not None and t.reuse_dst.numel():
            gbuf.index_add_(0, t.reuse_dst.to(self.device), carry)
        self.tier.release("prev_carry")
        out = torch.ones(nb, dtype=torch.bool)
        out[t.keep] = False
        rows = out.nonzero().flatten()
        self.tier.store(self.store.grads[k], t.buffer[rows], gbuf[rows.to(self.device)],
                        accumulate=True)
        nxt = self.tier.hold("carry", gbuf[t.keep.to(self.device)].clone()) \
            if t.keep.numel() else None
        self.tier.release("grad_rows")
        return nxt

    # -- passes ------------------------------------------------------------------------------
    def _forward(self, cache_aggregates: bool) -> None:
        model = self._module
        for k, choice in enumerate(self.choices):
            cache = cache_aggregates and choice.mode == "cache"
            prev = None
            for t, block in zip(self.transfers, self.blocks):
                buf, src = self._sources(k, t, prev)
                blk = block.to(self.device)
                self.tier.hold("block", blk.edge_index)
                out, agg = compute.forward(model, k, src, blk, cache)
                self.tier.hold("out", out)
                if agg is not None:
                    self.tier.hold("agg", agg)
                    self.tier.store(self.agg_host[k], t.dst, agg)
                self.tier.store(self.store.rows[k + 1], t.dst, out)
                self.tier.release("src", "out", "agg", "block")
                prev = self._keep_buffer(buf)
            self.tier.release_all()

    def _keep_buffer(self, buf: torch.Tensor) -> torch.Tensor | None:
        """The buffer the next batch may reuse rows from (inter+intra only)."""
        self.tier.release("buffer")
        if self.dedup != "inter+intra":
            return None
        return self.tier.hold("prev_buffer", buf)

    def _backward(self) -> None:
        model = self._module
        for k in reversed(range(len(self.choices))):
            cache = self.choices[k].mode == "cache"
            need = k > 0
            prev, carry = None, None
            for t, block in zip(self.transfers, self.blocks):
                blk = block.to(self.device)
                self.tier.hold("block", blk.edge_index)
                grad_out = self.tier.hold("grad_out", self.tier.load(
                    self.store.grads[k + 1], t.dst, vertex_rows=False))
                t0 = time.perf_counter()
                if cache:
                    agg = self.tier.hold("agg", self.tier.load(self.agg_host[k], t.dst, False))
                    x_dst = self.tier.hold("x_dst", self.tier.load(self.store.rows[k], t.dst,
                                                                   False))
                    grad_src, saved = compute.backward_cached(model, k, agg, x_dst, blk,
                                                              grad_out, need)
                    buf = None
                else:
                    buf, src = self._sources(k, t, prev)
                    grad_src, saved = compute.backward_recompute(model, k, src, blk, grad_out,
                                                                 need)
                    self.stats.recompute_seconds += time.perf_counter() - t0
                self.tier.transient(saved)
                self.tier.release("agg", "x_dst", "src", "grad_out")
                if need:
                    self.tier.hold("grad_src", grad_src)
                    self.tier.hold("prev_carry", carry)
                    carry = self._send_back(k, t, grad_src, carry)
                    self.tier.release("grad_src")
                if carry is not None:
                    self.tier.hold("prev_carry", carry)
                    self.tier.release("carry")
                self.tier.release("block")
                prev = self._keep_buffer(buf) if buf is not None else None
            self.tier.release_all()

    # -- epoch -------------------------------------------------------------------------------
    def train_epoch(self, epoch: int, progress: Any = None) -> dict[str, float]:
        """One offloaded full-graph epoch: chunked forward, backward, one optimizer step."""
        model = self._module
        self.stats.reset()
        self.shuffle_stats.reset()
        self.tier.release_all()
        self.tier.reset_peak()
        t0 = time.perf_counter()
        model.train()
        model.set_dropout_key(self.ctx.seed, epoch)
        self._optimizer.zero_grad(set_to_none=True)
        self.store.zero_grads()
        self._forward(cache_aggregates=True)
        top = self.store.rows[-1].detach().clone().requires_grad_(True)
        task = self.ctx.task
        loss = task.sharded_loss(top, self.masters, task.train_items(), epoch, self.group)
        loss.backward()
        self.store.grads[-1].copy_(top.grad)
        self._backward()
        for p in model.parameters():  # a layer no chunk reached still all-reduces
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        total, ar_bytes = sum_gradients(list(model.parameters()), loss.detach(), self.group)
        self._optimizer.step()
        epoch_time = time.perf_counter() - t0
        s = self.stats
        if progress is not None:
            progress.update(1)
        return {
            "epoch_time": epoch_time, "sample_time": 0.0, "load_time": 0.0,
            "comm_time": self.shuffle_stats.seconds, "compute_time": epoch_time
            - self.shuffle_stats.seconds, "train_loss": total,
            "bytes_host_to_rank": float(s.host_to_device),
            "bytes_host_to_device": float(s.host_to_device),
            "bytes_device_to_host": float(s.device_to_host),
            "bytes_rank_to_rank": float(s.rank_to_rank),
            "bytes_reused": float(s.reused), "bytes_allreduce": float(ar_bytes),
            "rows_host_loaded": float(s.rows_loaded), "rows_reused": float(s.rows_reused),
            "rows_intermediate": float(s.rows_intermediate),
            "edges_computed": float(sum(b.num_edges for b in self.blocks) * self.passes()),
            "replication_alpha": self.alpha,
            "peak_device_bytes": float(self.tier.peak),
            "device_bound_bytes": float(self.bound),
            "whole_part_device_bytes": float(self.whole_part_bytes),
            "recompute_time": s.recompute_seconds,
            "plan_time": self.plan_time / self.ctx.topo.world_size,  # summed: the mean
        }

    def passes(self) -> int:
        """Layer passes over the chunks per epoch that aggregate edges (forward: every
        layer; backward: the recomputed ones)."""
        return len(self.choices) + sum(c.mode == "recompute" for c in self.choices)

    def planned_rows_loaded(self) -> int:
        """Vertex rows this rank loads from its host per epoch, by the plan."""
        per_pass = sum(t.rows_loaded for t in self.transfers)
        return per_pass * self.passes()

    def num_steps(self, epoch: int) -> int:
        """One step per epoch."""
        return 1

    def evaluate(self, batch_size: int, splits: tuple[str, ...] = ("val", "test")
                 ) -> dict[str, float]:
        """Accuracy (and ROC-AUC for two classes) from the same chunked forward
        (collective)."""

        def forward() -> torch.Tensor:
            self._forward(cache_aggregates=False)
            return self.store.rows[-1]

        return self.ctx.task.evaluate_owned(self._module, forward, self.masters, splits,
                                            self.group)
