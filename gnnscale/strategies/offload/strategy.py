"""Full-graph training from host memory (HongTu): vertex data stays on the host, chunks of it
visit the device.

Every rank owns one part of an edge-cut book (its masters); each part is cut into ``chunks``
chunks and batch ``b`` runs one chunk of every part at once (:mod:`.chunks`). A rank given
only its part (``parts=``: its masters' rows and in-edges) chunks its part and gathers the
other parts' chunks from their ranks; the halo rows arrive from their owners as always, so it
reads nothing beyond its part, and checks ``device_budget_gb`` itself (the largest bound over
the ranks), which the launcher, without the graph, cannot.
Every layer's rows and gradients live in host buffers (:class:`~.tiers.HostStore`).
Forward, layer by layer, batch by batch: the owners load the rows the batch reads
(deduplicated per ``dedup``, :mod:`.transfers`), share them over the Shuffle,
each rank computes its chunk and writes the outputs back to the host. The loss is the task's,
from the top rows of the rank's masters (node classification: the summed cross-entropy of its
training vertices over the global training-set size). Backward,
from the top layer down, batch by batch (Algorithm 1): reload the inputs and recompute, or
reload the cached aggregate and recompute only the update (``intermediate``; ``auto`` decides
per batch and layer by HongTu's costs, :mod:`.rule`, measured in the first epoch's forward),
backpropagate the destinations' gradients, and send the sources' gradients back to their
owners' host buffers. One parameter all-reduce per epoch, so an epoch equals one process
training on the whole graph. ``peak_device_bytes`` is measured (:class:`~.tiers.DeviceTier`;
on a GPU the allocator's peak).

A typed graph's chunks carry their edges' ids (CSC positions) and types, and layer 0's host
rows are the model's encoded rows (:meth:`~gnnscale.models.base.GNN.encode` of the masters'
typed inputs), encoded on the device chunk by chunk once per forward pass with the present
parameters (the encoder is vertex-wise, so a row is encoded once per pass however many chunks
read it, not once per chunk that reads it, and the cached-aggregate path reads the same rows).
When the encoder trains (a typed input's linear maps and embedding tables), layer 0's backward
sends its sources' gradients back to their owners like every other layer's, and one
vertex-wise pass encodes each chunk's destinations again and backpropagates their gradient
into the encoder. The embedding tables' sparse gradients are summed over the ranks
(:func:`~gnnscale.distributed.sparse.reduce_sparse`; each rank's hold its masters' rows), the
rest in the one all-reduce. A model that reads edge features gets each chunk's ``edge_attr``
(the edge feature rows of its edge ids, :mod:`gnnscale.cache.edges`), gathered once at set-up
and moved to the device with the chunk (``bytes_edge_features``: per epoch, every time a
chunk's features visit the device). Untyped graphs without edge features do none of this.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from gnnscale.cache.edges import EdgeFeatures, edge_table
from gnnscale.cache.store import typed_inputs
from gnnscale.deps.shuffle import ShuffleStats, shuffle
from gnnscale.distributed import device as device_seam
from gnnscale.distributed.collectives import all_reduce_host, sum_gradients
from gnnscale.distributed.sparse import reduce_sparse, table_stats
from gnnscale.errors import ConfigError
from gnnscale.optim.base import sparse_parameters
from gnnscale.partition.parts import PartGraph
from gnnscale.sampling.base import Block
from gnnscale.strategies.base import RunContext, Strategy
from gnnscale.strategies.offload import compute, rule
from gnnscale.strategies.offload.bound import FLOAT, INDEX, encode_bound, layer_bound
from gnnscale.strategies.offload.chunks import Chunking, two_level
from gnnscale.strategies.offload.config import OffloadConfig, check_options
from gnnscale.strategies.offload.memory import ActivationModel
from gnnscale.strategies.offload.rule import CACHE, RECOMPUTE
from gnnscale.strategies.offload.tiers import DeviceTier, HostStore, TransferStats
from gnnscale.strategies.offload.transfers import BatchTransfer, plan_transfers

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from gnnscale.strategies.config import Checked

GB = 1e9
_ACTIVATIONS: dict[tuple, ActivationModel] = {}  # per layer architecture, fitted once


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    """Whether two edge-weight (or edge-slot) vectors (None: ones, or the only slot) are
    equal."""
    if a is None or b is None:
        return a is None and b is None
    return torch.equal(a, b)


class Offload(Strategy):
    """One offloaded full-graph epoch per ``train_epoch``; see the module docstring."""

    schema = OffloadConfig
    #: each chunk's matrix and transpose built once and reused by every pass (False: the
    #: model's own product per call, whose backward re-transposes: the benchmark's baseline)
    cached_products: bool = True
    #: whether layer 0's rows are encoded by trained parameters (a typed graph's typed input):
    #: re-encoded every pass, their gradient backpropagated into the encoder
    encoder_trains: bool = False

    def __init__(self, ctx: RunContext, chunks: int = 8, dedup: str = "inter+intra",
                 reorganize: bool = False, intermediate: str = "auto",
                 device_budget_gb: float | None = None, level2: str = "range") -> None:
        super().__init__(ctx)
        check_options(chunks, dedup, intermediate, device_budget_gb, ctx.model, level2)
        self.chunks, self.dedup, self.reorganize = chunks, dedup, reorganize
        self.level2 = level2
        self.intermediate, self.budget_gb = intermediate, device_budget_gb

    @classmethod
    def check_built(cls, cfg: DictConfig, built: Checked) -> None:
        """``strategy.device_budget_gb``: plan every rank's chunks here, in the launcher, and
        refuse a budget below the largest device bound, naming the smallest that works. The
        task, the graph it trains on and the model come from the one builder the ranks use
        (:func:`~gnnscale.strategies.base.build_task`, :func:`~gnnscale.strategies.base.
        build_model`: the task's ``prepare`` and its head included), from ``built.loaded``
        when the launcher loaded the dataset already."""
        if cfg.strategy.get("device_budget_gb") is None:
            return
        import copy
        from pathlib import Path

        from gnnscale import registry
        from gnnscale.distributed.topology import Topology
        from gnnscale.partition.provider import CachedPartitions
        from gnnscale.strategies.base import build_model, build_task

        task, graph = build_task(cfg, built.loaded)
        model = build_model(cfg, graph, task, private_temp=True)
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
                             seed=cfg.seed, task=task)
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
        x0 = self._first_inputs() if graph.is_typed else graph.x[self.masters]
        self.store = HostStore(x0, self.dims, self.device, input_grads=self.encoder_trains)
        del x0
        if self.encoder_trains:  # layer 0's sources need their gradient through the model's
            # input transform (input dropout, a residual projection), which a cached
            # aggregate has already applied: layer 0 recomputes from the rows
            self.modes[0] = [RECOMPUTE] * len(self.transfers)
        #: the chunks' edge features, gathered once (None: the model reads none)
        self.edges = EdgeFeatures(graph) if self.reads_edges else None
        if self.edges is not None:
            self.edges.attach(self.blocks)
        n = self.masters.numel()
        self.agg_host = [torch.zeros(n, self._module.aggregate_width(k, self.dims[k]))
                         if self._may(k, CACHE) else None for k in range(self.num_layers)]
        self._check_budget()
        self.alpha = self.chunking.replication(graph.num_nodes)
        #: per layer: the rule's choice and modelled seconds (``intermediate=auto``)
        self.rule_report: dict[int, dict] = {}
        self.rule_rates: rule.Rates | None = None
        self._agg_seconds = [[0.0] * len(self.transfers) for _ in range(self.num_layers)]
        #: per (layer, batch): the chunk's matrices, built on first use (layers with equal
        #: edge weights share them) and the weights they were built with
        self._products: dict[tuple[int, int], compute.ChunkProducts] = {}
        self._weights: dict[tuple[int, int], tuple[torch.Tensor | None, ...]] = {}
        if topo.rank == 0:
            print(self.describe(), flush=True)

    def plan(self) -> None:
        """This rank's chunks, transfers, the modes its layers may take and device bound (no
        buffers allocated, no collective: the launcher plans every rank with it)."""
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
        #: a rank given only its part (``parts=``): it chunks its part, gathers the others'
        self.from_part = isinstance(graph, PartGraph) and world > 1
        try:
            self.chunking: Chunking = self._two_level(self.chunks)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        self.reads_edges = bool(getattr(self._module, "reads_edge_features", False))
        #: dense parameters (one all-reduce) and embedding tables with sparse gradients
        self._sparse = sparse_parameters(self._module)
        skip = {id(p) for p in self._sparse}
        self._dense = [p for p in self._module.parameters() if id(p) not in skip]
        self.transfers = plan_transfers(self.chunking, part, self.masters_all, topo.rank,
                                        self.dedup, graph,
                                        edge_ids=graph.is_typed or self.reads_edges)
        self.blocks = [self._chunk_block(t) for t in self.transfers]
        self.dims = self._module.widths(graph.num_features)
        self.num_layers = len(self.dims) - 1
        fixed = {"cache": CACHE, "recompute": RECOMPUTE}.get(self.intermediate)
        if fixed is None and not compute.can_cache(self._module):
            fixed = RECOMPUTE  # GAT, residual models: nothing to cache
        #: per layer, the mode of every batch in run order; None until the rule decides
        self.modes: list[list[str] | None] = [
            None if fixed is None else [fixed] * len(self.transfers)
            for _ in range(self.num_layers)]
        self.plan_time = time.perf_counter() - t0
        self.masters = self.masters_all[topo.rank]
        #: featureless rows among its masters: the embedding rows it encodes every pass
        self._featureless_masters = float(_featureless(graph, self.masters))
        self.bound, self.bound_where = self._plan_bound()

    def _two_level(self, chunks: int) -> Chunking:
        """Every part's chunks (from a part: this rank's, the others' gathered: collective)."""
        ctx = self.ctx
        gather = self._gather if self.from_part else None
        return two_level(ctx.graph, self.part, ctx.topo.world_size, chunks, self.reorganize,
                         self.level2, ctx.topo.rank, gather)

    def _gather(self, mine: Any) -> list[Any]:
        """Every rank's ``mine``, in rank order (collective)."""
        every: list[Any] = [None] * self.ctx.topo.world_size
        dist.all_gather_object(every, mine, group=self.group)
        return every

    def _most(self, bound: int) -> int:
        """The largest of every rank's ``bound`` from a part (collective), else ``bound``: the
        ranks given parts= check the budget themselves, and agree."""
        if not self.from_part:
            return bound
        t = torch.tensor([bound], dtype=torch.float64)
        all_reduce_host(t, op=dist.ReduceOp.MAX, group=self.group)
        return int(t[0])

    def _chunk_block(self, t: BatchTransfer) -> Block:
        """A batch's block on the host: its edges, sources' ids, and with edge ids (a typed
        graph, a model reading edge features) those ids and the edges' types."""
        block = Block(t.edge_index, (t.src_ids.numel(), t.dst.numel()), t.src_ids, e_id=t.e_id)
        types = self.ctx.graph.type_per_edge
        if t.e_id is not None and types is not None:
            block.edge_type = types[t.e_id].long()
        return block

    def _edge_bytes(self) -> int:
        """Device bytes a chunk's block carries per edge besides its index: its type (a typed
        graph), its features (a model reading them)."""
        graph = self.ctx.graph
        width = edge_table(graph).shape[1] if self.reads_edges else 0
        return (INDEX if graph.type_per_edge is not None else 0) + FLOAT * width

    def _may(self, k: int, mode: str) -> bool:
        """Whether some batch of layer ``k`` may run in ``mode`` (undecided: both)."""
        return self.modes[k] is None or mode in self.modes[k]

    def _plan_bound(self) -> tuple[int, tuple[int, int]]:
        """The device bound (max over layers) and where it is reached (layer, batch); a layer
        the rule has not decided yet is bounded for both modes."""
        gen = torch.Generator().manual_seed(0)
        model = self._module
        was = model.training
        model.train()
        model.set_dropout_key(self.ctx.seed, 0)
        best, where = 0, (0, 0)
        whole = sum(self.masters_all[self.ctx.topo.rank].numel() * d * 4 for d in self.dims)
        edges = sum(b.num_edges for b in self.blocks)
        sources = torch.unique(torch.cat([t.src_ids for t in self.transfers])).numel()
        edge_bytes = self._edge_bytes()
        for k in range(self.num_layers):
            d_in, d_out = self.dims[k], self.dims[k + 1]
            acts = [self._activations(k, m, gen) for m in (CACHE, RECOMPUTE) if self._may(k, m)]
            b, i = layer_bound(self.transfers, d_in, d_out, self._may(k, CACHE),
                               lambda e, s, d, acts=acts: max(a(e, s, d) for a in acts),
                               products=model.splittable,
                               agg_width=model.aggregate_width(k, d_in),
                               edge_bytes=edge_bytes)
            if b > best:
                best, where = b, (k, i)
            whole += self._activations(k, RECOMPUTE, gen)(
                edges, sources, self.masters_all[self.ctx.topo.rank].numel())
        if self.ctx.graph.is_typed:  # layer 0's rows encoded chunk by chunk
            raw = 3 * INDEX + FLOAT * max(self.ctx.graph.feature_dims.values(), default=0)
            b, i = encode_bound(self.transfers, raw, self.dims[0])
            if b > best:
                best, where = b, (0, i)
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
        graph = self.ctx.graph
        relations = len(graph.edge_types) if graph.type_per_edge is not None else 0
        edge_dim = int(edge_table(graph).shape[1]) if self.reads_edges else 0
        key = (type(model).__name__, model.residual, repr(model.convs[k]), repr(model.norms[k])
               if k < model.num_layers - 1 else "last", model.dropout,
               model.input_dropout if k == 0 else 0.0, mode, d_in, d_out, relations, edge_dim)
        if key not in _ACTIVATIONS:
            ends = torch.tensor([[graph.node_types.index(a), graph.node_types.index(b)]
                                 for a, _, b in graph.edge_types])
            types = (graph.node_type_offset, ends) if graph.is_typed else None
            _ACTIVATIONS[key] = ActivationModel.fit(self._probe(k, mode == CACHE, d_out), d_in,
                                                    graph.num_nodes, gen, relations, edge_dim,
                                                    types)
        return _ACTIVATIONS[key]

    def _probe(self, k: int, cache: bool, d_out: int):
        model = self._module

        def run(block: Block, x: torch.Tensor) -> int:
            grad = torch.randn(block.num_dst, d_out)
            prod = compute.ChunkProducts.build(model, k, block) if model.splittable else None
            if cache:  # a cached aggregate is aggregate_width wide (a sum per slot)
                agg = x.new_ones(block.num_dst, model.aggregate_width(k, x.shape[1]))
                return compute.backward_cached(model, k, agg, x[: block.num_dst],
                                               block, grad, True, products=prod)[1]
            return compute.backward_recompute(model, k, x, block, grad, True, products=prod)[1]
        return run

    def _check_budget(self, need: int | None = None) -> None:
        """Refuse a plan whose device bound exceeds the budget; ``need`` is the smallest
        budget that fits every rank (the launcher's figure), else this rank's bound."""
        if self.budget_gb is None or self._most(self.bound) <= self.budget_gb * GB:
            return
        need = self._most(self.bound) if need is None else need
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
                self.chunking = self._two_level(chunks)
                self.transfers = plan_transfers(self.chunking, self.part, self.masters_all,
                                                ctx.topo.rank, self.dedup, ctx.graph,
                                                edge_ids=ctx.graph.is_typed or self.reads_edges)
                if self._most(self._plan_bound()[0]) <= budget:
                    return chunks
            return None
        finally:
            self.chunks, self.chunking, self.transfers = saved

    def describe(self) -> str:
        """The plan in a few lines (chunks, dedup, bound, per-layer modes)."""
        lines = [f"offload plan (rank 0): {self.chunks} chunks x {self.ctx.topo.world_size} "
                 f"parts, dedup={self.dedup}, reorganize={self.reorganize}, alpha="
                 f"{self.chunking.replication(self.ctx.graph.num_nodes):.3f}, planned in "
                 f"{self.plan_time:.3f}s; device bound {self.bound} bytes"
                 + (f" of budget {int(self.budget_gb * GB)}" if self.budget_gb else "")
                 + f" (the whole part at once: ~{self.whole_part_bytes} bytes, modelled)"]
        for k, modes in enumerate(self.modes):
            what = ("cache or recompute per batch, by HongTu's costs measured in the first "
                    "epoch" if modes is None else f"{modes[0]} (every batch)")
            lines.append(f"  layer {k}: {what}")
        return "\n".join(lines)

    # -- the rule ----------------------------------------------------------------------------
    def _now(self) -> float:
        """A clock read after the device's queued work."""
        device_seam.synchronize(self.device)
        return time.perf_counter()

    def _decide(self) -> None:
        """Every undecided layer's modes from the costs of the forward pass just run (its
        copies, exchanges and aggregations), agreed over ranks (collective)."""
        rates = rule.Rates.measured(self.stats, self.shuffle_stats)
        open_ = [k for k, m in enumerate(self.modes) if m is None]
        costs = torch.zeros(self.num_layers, len(self.transfers), 3, dtype=torch.float64)
        for k in open_:
            for b, t in enumerate(self.transfers):
                costs[k, b] = torch.tensor(rule.batch_costs(
                    t, self.dims[k], self._agg_seconds[k][b], rates,
                    self._module.aggregate_width(k, self.dims[k])))
        if self.ctx.topo.world_size > 1:
            all_reduce_host(costs, op=dist.ReduceOp.MAX, group=self.group)
        for k in open_:
            self.modes[k] = rule.decide(costs[k])
            self.rule_report[k] = rule.report(costs[k], self.modes[k])
            if not self._may(k, CACHE):
                self.agg_host[k] = None
        self.rule_rates = rates
        if self.ctx.topo.rank == 0:
            print(self.describe_rule(), flush=True)

    def describe_rule(self) -> str:
        """The rule's choice per layer, its modelled seconds and this rank's measured rates."""
        r = self.rule_rates
        lines = [f"offload intermediate rule (rank 0 rates, MB/s: host->device {r.h2d / 1e6:.0f}"
                 f", device->host {r.d2h / 1e6:.0f}, rank->rank {r.r2r / 1e6:.0f}, reuse "
                 f"{r.reuse / 1e6:.0f})"]
        for k, x in sorted(self.rule_report.items()):
            lines.append(f"  layer {k}: cache {x['cached']}, recompute {x['recomputed']} of "
                         f"{len(self.transfers)} batches ({x['modes']}); modelled "
                         f"{x['modelled_s']:.4f}s against {x['modelled_all_cache_s']:.4f}s "
                         f"all cached, {x['modelled_all_recompute_s']:.4f}s all recomputed")
        return "\n".join(lines)

    # -- a chunk's matrices ------------------------------------------------------------------
    def _chunk_products(self, k: int, b: int) -> compute.ChunkProducts | None:
        """Layer ``k``'s matrix and transpose of batch ``b``, built on the host the first time
        (one pair per distinct edge weights: layers with the same weights share it), on the
        device and held by the tier while the batch runs; None for a model that cannot split
        its aggregation (GAT: its conv runs as it is)."""
        model = self._module
        if not model.splittable or not self.cached_products:
            return None
        prod = self._products.get((k, b))
        if prod is None:
            with torch.no_grad():
                w = model.edge_weight(k, self.blocks[b])
                slot = model.edge_slot(k, self.blocks[b])
            key = tuple(None if v is None else v.detach().to("cpu") for v in (w, slot))
            slots = model.aggregate_slots(k)
            for j in range(k):  # a lower layer with the same weights (and slots): its matrices
                if (j, b) in self._weights and self._products[(j, b)].slots == slots and all(
                        _same(a, c) for a, c in zip(self._weights[(j, b)], key)):
                    prod, key = self._products[(j, b)], self._weights[(j, b)]
                    break
            else:
                prod = compute.ChunkProducts.of(self.blocks[b], key[0], torch.float32, key[1],
                                                slots)
            self._products[(k, b)], self._weights[(k, b)] = prod, key
        on_device = prod.to(self.device)
        # counted while held: on a CPU host they serve in place and live on in host memory
        self.tier.hold("matrix", on_device.matrix, track=False)
        self.tier.hold("matrix_t", on_device.matrix_t, track=False)
        return on_device

    # -- a typed graph's layer-0 rows -------------------------------------------------------
    def _inputs(self, t: BatchTransfer) -> Any:
        """The typed inputs of batch ``t``'s destinations (this rank's chunk), on the device."""
        return self.tier.load_inputs(typed_inputs(self.ctx.graph, self.masters[t.dst]))

    def _first_inputs(self) -> torch.Tensor:
        """Layer 0's rows of this rank's masters at set-up, encoded chunk by chunk; sets
        :attr:`encoder_trains` (whether any row depends on a trained parameter). Refuses an
        encoding that is not ``dims[0]``-wide float rows (the host tier stores rows)."""
        model, n, width = self._module, self.masters.numel(), self.dims[0]
        rows, trains = torch.zeros(n, width), False
        for t in self.transfers:
            x = model.encode(self._inputs(t))
            if not x.is_floating_point() or x.dim() != 2 or x.shape[1] != width:
                raise ConfigError(
                    f"strategy=offload keeps layer 0's rows in host memory as {width}-wide float "
                    f"rows, but {type(model).__name__}.encode gives {x.dtype} rows of shape "
                    f"{tuple(x.shape)} (model.featureless=onehot feeds vertex ids): use "
                    "model.featureless=embedding, or strategy=data")
            trains = trains or x.requires_grad
            rows[t.dst] = x.detach().to("cpu")
        self.encoder_trains = trains
        self.tier.release_all()
        return rows

    def _encode(self) -> None:
        """Layer 0's host rows encoded again with the present parameters, chunk by chunk (no
        autograd)."""
        with torch.no_grad():
            for t in self.transfers:
                x = self.tier.hold("encoded", self._module.encode(self._inputs(t)))
                self.tier.store(self.store.rows[0], t.dst, x)
                self.tier.release("encoded")
        self.tier.release_all()

    def _backward_inputs(self) -> None:
        """The encoder's gradient: each chunk's destinations encoded again with autograd and
        backpropagated from their rows' gradient, summed in the host tier by layer 0's
        backward."""
        for t in self.transfers:
            x = self.tier.hold("encoded", self._module.encode(self._inputs(t)))
            g = self.tier.hold("grad_encoded", self.tier.load(self.store.grads[0], t.dst,
                                                             vertex_rows=False))
            self.tier.measure()
            torch.autograd.backward(x, g)
            del x, g
            self.tier.release("encoded", "grad_encoded")
        self.tier.release_all()

    # -- moving rows -------------------------------------------------------------------------
    def _device_block(self, b: int) -> Block:
        """Batch ``b``'s block on the device, held by the tier while the batch runs: its edges,
        and their types and features when it has them (its edge ids stay on the host); the
        features' bytes counted."""
        block = self.blocks[b]
        blk = (block if block.e_id is None else replace(block, e_id=None)).to(self.device)
        self.tier.hold("block", blk.edge_index, track=False)
        self.tier.hold("edge_type", blk.edge_type, track=False)
        if blk.edge_attr is not None:
            self.tier.hold("edge_attr", blk.edge_attr, track=False)
            self.stats.edge_features += blk.edge_attr.numel() * blk.edge_attr.element_size()
        return blk

    def _fill(self, k: int, t: BatchTransfer, prev: torch.Tensor | None) -> torch.Tensor:
        """The batch's device buffer of layer-``k`` rows: reused rows, then loaded ones (all
        loaded when no previous buffer is on the device)."""
        host = self.store.rows[k]
        if prev is None or t.reuse_dst.numel() == 0:
            return self.tier.load(host, t.buffer)
        buf = torch.empty(t.buffer.numel(), host.shape[1], device=self.device)
        self.tier.track(buf)
        self.tier.copy_rows(buf, t.reuse_dst, prev, t.reuse_src)
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

    def _send_back(self, k: int, t: BatchTransfer, g: torch.Tensor,
                   carry: torch.Tensor | None) -> torch.Tensor | None:
        """Sources' gradients (``g``: per row of cat(buffer, received)) to their owners,
        summed into the buffer rows; rows the next batch holds again stay on the device
        (returned), the rest are added to the host."""
        nb, nr = t.buffer.numel(), sum(t.recv_counts)
        back = self.tier.hold("grad_back", self._exchange(
            g[nb:], torch.arange(nr), t.recv_counts, t.send_counts))
        gbuf = g[:nb]
        gbuf.index_add_(0, t.send_idx.to(self.device), back)
        del back
        self.tier.release("grad_back")
        if carry is not None and t.reuse_dst.numel():
            gbuf.index_add_(0, t.reuse_dst.to(self.device), carry)
        self.tier.release("prev_carry")
        out = torch.ones(nb, dtype=torch.bool)
        out[t.keep] = False
        rows = out.nonzero().flatten()
        self.tier.store(self.store.grads[k], t.buffer[rows], gbuf[rows.to(self.device)],
                        accumulate=True)
        if not t.keep.numel():
            return None
        return self.tier.hold("carry", gbuf[t.keep.to(self.device)].clone())

    # -- passes ------------------------------------------------------------------------------
    def _forward(self, cache_aggregates: bool, probe: bool = False) -> None:
        """Every layer, batch by batch; ``cache_aggregates`` sends the aggregates of the
        batches that may be cached to the host; ``probe`` times each chunk's aggregation.
        Trained layer-0 rows are encoded first (the parameters changed since the last pass)."""
        if self.encoder_trains:
            self._encode()
        for k in range(self.num_layers):
            prev = None
            for b, (t, block) in enumerate(zip(self.transfers, self.blocks)):
                cache = cache_aggregates and (self.modes[k] is None
                                              or self.modes[k][b] == CACHE)
                prev = self._forward_batch(k, b, t, block, prev, cache, probe)
            del prev
            self.tier.release_all()

    def _forward_batch(self, k: int, b: int, t: BatchTransfer, block: Block,
                       prev: torch.Tensor | None, cache: bool, probe: bool
                       ) -> torch.Tensor | None:
        """One chunk of layer ``k``'s forward; the buffer the next batch may reuse."""
        buf, src = self._sources(k, t, prev)
        blk = self._device_block(b)
        prod = self._chunk_products(k, b)
        out, agg, seconds = compute.forward(self._module, k, src, blk, cache,
                                            self._now if probe else None, prod)
        del prod
        self._agg_seconds[k][b] = seconds
        del src
        self.tier.release("src")
        self.tier.hold("out", out)
        if agg is not None:
            self.tier.hold("agg", agg)
            self.tier.store(self.agg_host[k], t.dst, agg)
        self.tier.store(self.store.rows[k + 1], t.dst, out)
        self.tier.release("out", "agg", "block", "edge_type", "edge_attr", "matrix", "matrix_t")
        return self._keep_buffer(buf)

    def _keep_buffer(self, buf: torch.Tensor | None) -> torch.Tensor | None:
        """The buffer the next batch may reuse rows from (inter+intra only)."""
        self.tier.release("buffer")
        if self.dedup != "inter+intra" or buf is None:
            return None
        return self.tier.hold("prev_buffer", buf)

    def _backward(self) -> None:
        for k in reversed(range(self.num_layers)):
            prev, carry = None, None
            for b, (t, block) in enumerate(zip(self.transfers, self.blocks)):
                prev, carry = self._backward_batch(k, b, self.modes[k][b], t, block, prev,
                                                   carry)
            del prev, carry
            self.tier.release_all()

    def _backward_batch(self, k: int, b: int, mode: str, t: BatchTransfer, block: Block,
                        prev: torch.Tensor | None, carry: torch.Tensor | None
                        ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """One chunk of layer ``k``'s backward in ``mode``; (the buffer the next batch may
        reuse, the gradient rows it carries on). Layer 0's sources get their gradient too when
        the encoder trains."""
        model, need = self._module, k > 0 or self.encoder_trains
        blk = self._device_block(b)
        grad_out = self.tier.hold("grad_out", self.tier.load(
            self.store.grads[k + 1], t.dst, vertex_rows=False))
        buf = None
        prod = self._chunk_products(k, b)
        if mode == CACHE:
            agg = self.tier.hold("agg", self.tier.load(self.agg_host[k], t.dst, False))
            x_dst = self.tier.hold("x_dst", self.tier.load(self.store.rows[k], t.dst, False))
            grad_src, _ = compute.backward_cached(model, k, agg, x_dst, blk, grad_out, need,
                                                  self._at_peak, prod)
            del agg, x_dst
        else:
            t0 = time.perf_counter()
            buf, src = self._sources(k, t, prev)
            grad_src, _ = compute.backward_recompute(model, k, src, blk, grad_out, need,
                                                     self._at_peak, prod)
            del src
            self.stats.recompute_seconds += time.perf_counter() - t0
        del grad_out, prod
        self.tier.release("agg", "x_dst", "src", "grad_out", "matrix", "matrix_t")
        self.tier.hold("prev_carry", carry)
        if need:
            self.tier.hold("grad_src", grad_src)
            g = self.tier.hold("grad_rows", grad_src.new_zeros(
                t.buffer.numel() + sum(t.recv_counts), grad_src.shape[1]))
            g.index_add_(0, t.assemble.to(self.device), grad_src)
            del grad_src
            self.tier.release("grad_src")
            carry = self._send_back(k, t, g, carry)
            del g
            self.tier.release("grad_rows")
        if carry is not None:
            self.tier.hold("prev_carry", carry)
            self.tier.release("carry")
        self.tier.release("block", "edge_type", "edge_attr")
        return self._keep_buffer(buf), carry

    def _at_peak(self, tensors: list[torch.Tensor]) -> None:
        """A chunk's recompute before its backward: measure with what autograd saved."""
        self.tier.measure(*tensors)

    # -- epoch -------------------------------------------------------------------------------
    def train_epoch(self, epoch: int, progress: Any = None) -> dict[str, float]:
        """One offloaded full-graph epoch: chunked forward, backward, one optimizer step; the
        first one also decides the undecided layers' modes (collective)."""
        model = self._module
        self.stats.reset()
        self.shuffle_stats.reset()
        self.tier.release_all()
        device_seam.reset_peak(self.device)
        self.tier.reset_peak()
        t0 = time.perf_counter()
        model.train()
        model.set_dropout_key(self.ctx.seed, epoch)
        self._optimizer.zero_grad(set_to_none=True)
        self.store.zero_grads()
        deciding = any(m is None for m in self.modes)
        self._forward(cache_aggregates=True, probe=deciding)
        if deciding:
            self._decide()
        top = self.store.rows[-1].detach().clone().requires_grad_(True)
        task = self.ctx.task
        loss = task.sharded_loss(top, self.masters, task.train_items(), epoch, self.group)
        loss.backward()
        self.store.grads[-1].copy_(top.grad)
        self._backward()
        if self.encoder_trains:
            self._backward_inputs()
        for p in self._dense:  # a layer no chunk reached still all-reduces
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        total, ar_bytes = sum_gradients(self._dense, loss.detach(), self.group)
        if self._sparse and self.ctx.topo.world_size > 1:  # each rank's masters' rows, summed
            ar_bytes += reduce_sparse(self._sparse, self.group, mean=False)
        self._optimizer.step()
        epoch_time = time.perf_counter() - t0
        s = self.stats
        peak = device_seam.peak_allocated(self.device)
        if progress is not None:
            progress.update(1)
        m = {
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
            "edges_computed": float(self.edges_per_epoch()),
            "replication_alpha": self.alpha,
            "peak_device_bytes": float(self.tier.peak if peak is None else peak),
            "device_bound_bytes": float(self.bound),
            "whole_part_device_bytes": float(self.whole_part_bytes),
            "recompute_time": s.recompute_seconds,
            "plan_time": self.plan_time,  # the mean over ranks (runner/metrics.py)
        }
        if self.edges is not None:
            m["bytes_edge_features"] = float(s.edge_features)
        for t, nbytes in s.typed_features.items():  # raw features within host_to_device
            m[f"bytes_host_to_rank.{t}"] = float(nbytes)
        if self._sparse:  # whole on every rank; its masters' featureless rows looked up
            m.update(table_stats(self._sparse), embedding_rows_touched=self._featureless_masters)
        for k, modes in enumerate(self.modes):  # this rank's chunks; summed over ranks
            m[f"chunks_cached_l{k}"] = float(modes.count(CACHE))
            m[f"chunks_recomputed_l{k}"] = float(modes.count(RECOMPUTE))
        return m

    def edges_per_epoch(self) -> int:
        """Edges this rank aggregates per epoch: every layer's forward, and the backward's
        recomputed batches."""
        edges = [b.num_edges for b in self.blocks]
        total = self.num_layers * sum(edges)
        for modes in self.modes:
            total += sum(e for e, m in zip(edges, modes or ()) if m == RECOMPUTE)
        return total

    def planned_rows_loaded(self) -> int:
        """Vertex rows this rank loads from its host per epoch, by the plan and the modes: every
        forward batch, and each recomputed batch of the backward (its reused rows too when the
        batch before it was cached: no buffer to reuse them from)."""
        total = self.num_layers * sum(t.rows_loaded for t in self.transfers)
        for modes in self.modes:
            prev = CACHE
            for t, mode in zip(self.transfers, modes or ()):
                if mode == RECOMPUTE:
                    total += t.rows_loaded + (t.rows_reused if prev == CACHE else 0)
                prev = mode
        return total

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


def _featureless(graph: Any, ids: torch.Tensor) -> int:
    """How many of ``ids`` are of a featureless node type (0 on a graph without types)."""
    if not graph.is_typed:
        return 0
    dims = graph.feature_dims
    none = torch.tensor([dims[t] == 0 for t in graph.node_types])
    return int(none[graph.node_type_of(ids)].sum())
