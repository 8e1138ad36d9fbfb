"""Rank functions for the vertex-cut plan tests: one spawn runs many cases inside the ranks."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from gnnscale.data.graph import GraphStore
from gnnscale.models.gcn import GCN
from gnnscale.models.gin import GIN
from gnnscale.models.sage import SAGE
from gnnscale.partition.cvc import CvcPartitioner
from gnnscale.partition.hvc import HvcPartitioner
from gnnscale.partition.iec import IecPartitioner
from gnnscale.partition.oec import OecPartitioner
from gnnscale.sampling.base import Block
from gnnscale.strategies.fullgraph.vertex_cut import VertexCutPlan

DROPOUT_KEY = (5, 1)
PARTITIONERS = {"iec": IecPartitioner, "oec": OecPartitioner, "cvc": CvcPartitioner,
                "hvc": lambda **kw: HvcPartitioner(threshold=4, **kw)}
MODELS = {
    "sage": lambda **kw: SAGE(6, 3, hidden=8, num_layers=3, dropout=0.5, **kw),
    "sage_sum": lambda **kw: SAGE(6, 3, hidden=8, num_layers=3, dropout=0.5, aggr="sum", **kw),
    "gcn": lambda **kw: GCN(6, 3, hidden=8, num_layers=3, dropout=0.5, gcn_norm="graph", **kw),
    "gin": lambda **kw: GIN(6, 3, hidden=8, num_layers=3, dropout=0.5, **kw),
    "gcn_res": lambda **kw: GCN(6, 3, hidden=8, num_layers=3, dropout=0.5, gcn_norm="graph",
                                residual=True, norm="layer", **kw),
    "sage_res": lambda **kw: SAGE(6, 3, hidden=8, num_layers=3, dropout=0.5, residual=True,
                                  norm="layer", input_dropout=0.2, **kw),
}


def tiny_graph(n: int = 48, e: int = 220, seed: int = 0) -> GraphStore:
    """A directed random graph with a hub, features, 3 classes and 20 training vertices."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (e,), generator=g)
    dst = torch.where(torch.rand(e, generator=g) < 0.15, torch.zeros(e, dtype=torch.long),
                      torch.randint(0, n, (e,), generator=g))
    return GraphStore.from_edge_index(
        torch.stack([src, dst]), n, symmetrize=False, self_loops="remove",
        x=torch.randn(n, 6, generator=g), y=torch.randint(0, 3, (n,), generator=g),
        train_idx=torch.randperm(n, generator=g)[:20], num_classes=3, name="tiny-vc")


def make_model(name: str, reorder: str, graph: GraphStore):
    torch.manual_seed(0)
    model = MODELS[name](reorder_update=reorder)
    model.bind_graph(graph)
    model.train()
    model.set_dropout_key(*DROPOUT_KEY)
    return model


def _loss(out: torch.Tensor, ids: torch.Tensor, graph: GraphStore) -> torch.Tensor:
    train = graph.mask("train")[ids]
    return F.cross_entropy(out[train], graph.y[ids][train], reduction="sum") / \
        graph.train_idx.numel()


def reference(name: str, reorder: str) -> dict:
    """Single-process full-graph training: model.layer over the whole graph as one Block."""
    graph = tiny_graph()
    model = make_model(name, reorder, graph)
    n = graph.num_nodes
    whole = Block(graph.edge_index(), (n, n), torch.arange(n))
    loss = _loss(model(graph.x, [whole] * model.num_layers), torch.arange(n), graph)
    loss.backward()
    return {"loss": loss.item(), "grads": [p.grad.clone() for p in model.parameters()],
            "edges": graph.num_edges}


def vertex_cut_cases(topo, cases: list[tuple[str, str, str, str]]) -> list[dict]:
    """Per (partitioner, masters, model, reorder): loss, all-reduced grads and plan figures."""
    graph = tiny_graph()
    results = []
    for part, masters, name, reorder in cases:
        masters, *flags = masters.split("+")  # e.g. blocked+ring+overlap, +wait: hide=False
        book = PARTITIONERS[part](masters=masters).partition(graph, topo.world_size)
        model = make_model(name, reorder, graph)
        plan = VertexCutPlan(graph, book, model, topo, ring="ring" in flags,
                             overlap="overlap" in flags, hide="wait" not in flags)
        loss = _loss(plan.forward(model), plan.masters, graph)
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        total = loss.detach().clone()
        dist.all_reduce(total)
        results.append({
            "loss": total.item(), "grads": [p.grad.clone() for p in model.parameters()],
            "stats": plan.stats(), "masters": plan.masters,
            "bcast_peers": plan.bcast.send_counts, "reduce_peers": plan.reduce.send_counts,
        })
    return results
