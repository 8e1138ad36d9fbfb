"""Full-graph training (NeutronStar, DeepGalois): every rank owns one part, every epoch is one
forward and backward over the whole graph.

Rank ``r`` computes the rows of its part's vertices (its masters). How the rows of other parts
that its convs read get there is the plan's business (:class:`FullGraphPlan`): on an edge-cut,
``deps=depcache`` recomputes them from an L-hop feature cache, ``deps=depcomm`` receives them
from their owners each layer, ``deps=hybrid`` mixes both by NeutronStar's cost model
(:class:`~gnnscale.strategies.fullgraph.edge_cut.EdgeCutPlan`); on a vertex-cut, masters and mirrors
synchronise (:class:`~.vertex_cut.VertexCutPlan`, ``deps=depcomm`` only).
The loss is the task's, from the rows of the rank's masters (node classification: the summed
cross-entropy of its training vertices over the global training-set size; link prediction:
the pairs whose source it holds, endpoint rows exchanged) and gradients are sum-all-reduced,
so an epoch equals one process training on the whole graph (``dist.world_size=1``).
Evaluation runs the same partitioned forward.

On a typed graph (a typed model: ``model=rgcn``) the plan reads its layer-0 rows as typed
inputs and encodes them in every forward (:mod:`.plan`); the model's embedding tables of
featureless types get sparse gradients, which stay out of the flat all-reduce: every rank's
looked-up rows are all-gathered and summed (:func:`~gnnscale.distributed.sparse.reduce_sparse`
with ``mean=False``: each rank's gradient is its share of the one loss, as the dense ones
are). Every rank holds the tables whole (``embedding_rows_held``, ``embedding_bytes``) and
looks up the featureless rows among the layer-0 rows it reads (``embedding_rows_touched``).
A model that reads edge features gets each block's rows of them, gathered once at set-up
(``bytes_edge_features``: the bytes this rank holds).
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

from gnnscale.distributed.collectives import all_reduce_host, sum_gradients
from gnnscale.distributed.sparse import reduce_sparse, table_stats
from gnnscale.optim.base import sparse_parameters
from gnnscale.sampling.base import TypedInputs
from gnnscale.strategies.base import RunContext, Strategy
from gnnscale.strategies.fullgraph.config import FullGraphConfig, check_combination
from gnnscale.strategies.fullgraph.edge_cut import EdgeCutPlan
from gnnscale.strategies.fullgraph.plan import FullGraphPlan

EDGE_CUT_DEPS = ("depcache", "depcomm", "hybrid")


class FullGraph(Strategy):
    """One full-graph epoch per ``train_epoch``; see the module docstring."""

    schema = FullGraphConfig

    def __init__(self, ctx: RunContext, ring: bool = False, overlap: bool = True) -> None:
        super().__init__(ctx)
        self.ring, self.overlap = ring, overlap
        self.plan: FullGraphPlan | None = None
        self.plan_report: dict = {}

    # -- setup -------------------------------------------------------------------------------
    def setup(self) -> None:
        """Model, optimizer and the edge- or vertex-cut plan of this rank's part."""
        ctx, topo = self.ctx, self.ctx.topo
        world, graph = topo.world_size, ctx.graph
        self._module = ctx.model.to(topo.device)
        self._module.bind_graph(graph)
        self._optimizer = ctx.optim(self._module)
        #: embedding tables with sparse gradients: summed by reduce_sparse, not all-reduced
        self._sparse = sparse_parameters(self._module)
        skip = {id(p) for p in self._sparse}
        self._dense = [p for p in self._module.parameters() if id(p) not in skip]
        t0 = time.perf_counter()
        book = ctx.partition.get(world) if world > 1 else None
        kind = book.kind if book is not None else "edge_cut"
        check_combination(kind, ctx.deps if world > 1 else _NoDeps(), self._module,
                          graph.num_features, getattr(ctx.partition, "name", "?"))
        if kind == "vertex_cut":
            from gnnscale.strategies.fullgraph.vertex_cut import VertexCutPlan

            self.plan = VertexCutPlan(graph, book, self._module, topo, group=self.group,
                                      ring=self.ring, overlap=self.overlap)
        else:
            part = book.part if book is not None else torch.zeros(graph.num_nodes,
                                                                   dtype=torch.int64)
            self.plan = EdgeCutPlan(graph, part, topo.rank, world, ctx.deps,
                                    self._module.widths(graph.num_features),
                                    group=self.group, ring=self.ring, overlap=self.overlap,
                                    device=topo.device,
                                    edge_features=self._module.reads_edge_features,
                                    sparse_edges=getattr(self._module, "sparse_conv", True))
            self.plan_report = self.plan.layout.report
        self.plan_time = time.perf_counter() - t0
        self.masters = self.plan.masters
        self._fixed = self._fixed_stats()
        self.edge_skew = self._edge_skew(self.plan.stats()["edges_computed"])
        if topo.rank == 0 and self.plan_report:
            print(format_report(self.plan_report, type(ctx.deps).__name__), flush=True)

    def _fixed_stats(self) -> dict[str, float]:
        """What the rank holds for the whole run: the embedding tables and the featureless
        rows it looks up (none: no tables), the edge feature bytes (a model that reads
        them)."""
        out = {}
        if self._sparse:
            graph, x = self.ctx.graph, self.plan.x
            featureless = [k for k, t in enumerate(graph.node_types)
                           if not graph.feature_dims.get(t)]
            rows = int(torch.isin(x.node_type.cpu(), torch.tensor(featureless)).sum()) \
                if isinstance(x, TypedInputs) else 0
            out = {**table_stats(self._sparse), "embedding_rows_touched": float(rows)}
        if self._module.reads_edge_features:
            out["bytes_edge_features"] = float(getattr(self.plan, "edge_bytes", 0))
        return out

    def _edge_skew(self, edges: float) -> float:
        """Max over ranks of the edges computed per epoch, over their mean."""
        if self.ctx.topo.world_size == 1:
            return 1.0
        t = torch.tensor([edges, edges], dtype=torch.float64)
        both = t.clone()
        all_reduce_host(t[:1], group=self.group)
        all_reduce_host(both[1:], op=dist.ReduceOp.MAX, group=self.group)
        mean = float(t[0]) / self.ctx.topo.world_size
        return float(both[1]) / mean if mean else 1.0

    # -- epoch -------------------------------------------------------------------------------
    def train_epoch(self, epoch: int, progress: Any = None) -> dict[str, float]:
        """One full-graph forward and backward over the partitions, one optimizer step."""
        ctx = self.ctx
        model, plan = self._module, self.plan
        plan.stats()  # drop what evaluation sent
        comm0 = plan.shuffle_stats.seconds
        t0 = time.perf_counter()
        model.train()
        model.set_dropout_key(ctx.seed, epoch)
        self._optimizer.zero_grad(set_to_none=True)
        out = plan.forward(model)
        loss = ctx.task.sharded_loss(out, self.masters, ctx.task.train_items(), epoch, self.group)
        loss.backward()
        t1 = time.perf_counter()
        total, ar_bytes = self._allreduce(loss.detach())
        t_ar = time.perf_counter() - t1
        self._optimizer.step()
        epoch_time = time.perf_counter() - t0
        shuffled = plan.shuffle_stats.seconds - comm0
        s = plan.stats()
        g = ctx.graph
        m = {
            "epoch_time": epoch_time, "sample_time": 0.0, "load_time": 0.0,
            "comm_time": shuffled + t_ar,
            "compute_time": epoch_time - shuffled - t_ar,
            "train_loss": total,
            "bytes_forward": s["bytes_forward"], "bytes_backward": s["bytes_backward"],
            "bytes_rank_to_rank": s["bytes_forward"] + s["bytes_backward"],
            "bytes_allreduce": float(ar_bytes),
            "edges_computed": s["edges_computed"], "vertex_updates": s["vertex_updates"],
            # summed over ranks: edges computed over |E| x L (1 = no redundant edge)
            "edge_redundancy": s["edges_computed"] / max(g.num_edges * model.num_layers, 1),
            "replicated_rows": s["replicated_rows"],
            "cached_feature_bytes": s["cached_feature_bytes"],
            # edge-cut: bytes of replicated features, rows and edges (hybrid: within budget)
            "replicated_bytes": s.get("replicated_bytes", 0.0),
            "edge_skew": self.edge_skew,
            "plan_time": self.plan_time,  # the mean over ranks (runner/metrics.py)
            **self._fixed,
        }
        if progress is not None:
            progress.update(1)
        return m

    def _allreduce(self, loss: torch.Tensor) -> tuple[float, int]:
        """Sum every dense parameter gradient and the loss over ranks in one flat buffer, and
        the embedding tables' sparse gradients by all-gathering them (summed, not averaged:
        each rank's is its share of the one loss)."""
        total, nbytes = sum_gradients(self._dense, loss, self.group)
        if self._sparse and self.ctx.topo.world_size > 1:
            nbytes += reduce_sparse(self._sparse, self.group, mean=False)
        return total, nbytes

    def num_steps(self, epoch: int) -> int:
        """One step per epoch."""
        return 1

    def evaluate(self, batch_size: int, splits: tuple[str, ...] = ("val", "test")
                 ) -> dict[str, float]:
        """Accuracy (and ROC-AUC for two classes) from the same partitioned forward
        (collective)."""
        return self.ctx.task.evaluate_owned(self._module, lambda: self.plan.forward(self._module),
                                            self.masters, splits, self.group)


class _NoDeps:
    """Stands for the manager on one rank (nothing is remote): checks only the model."""

    replicates_all, replicates_none = False, True

    def budget_bytes(self) -> None:
        return None


def format_report(report: dict, deps: str) -> str:
    """The plan per layer: dependencies replicated vs communicated, bytes, planning time."""
    lines = [f"fullgraph plan (rank 0, {deps}): {report['plan_seconds']:.3f}s, "
             f"replicated {report['replicated_bytes']} bytes"
             + (f" of budget {report['budget_bytes']}" if report["budget_bytes"] else "")]
    if "guard" in report:  # the hybrid weighed against both fixed plans (deps/planner.py)
        g = report["guard"]
        lines.append(f"  guard: kept the {g['chose']} plan; predicted s/epoch "
                     + ", ".join(f"{k} {v:.4g}" for k, v in g["predicted_s"].items()))
    for x in report["layers"]:
        lines.append(f"  layer {x['layer']}: replicated {x['replicated']} rows "
                     f"({x['replicated_bytes']} B), communicated {x['communicated']} rows "
                     f"({x['received_bytes']} B received)")
    return "\n".join(lines)
