"""Rank functions for the layer-wise evaluation tests (module level, so spawn can import them)."""

from __future__ import annotations

import torch

from gnnscale.evaluation.evaluate import evaluate, layerwise_logits
from gnnscale.models.gcn import GCN
from gnnscale.models.gin import GIN
from gnnscale.models.sage import SAGE
from tests._fullgraph_fns import make_graph

MODELS = ("gcn", "sage", "gin")


def binary_graph():
    """40 input features (wider than the hidden layer: layer 0 reorders), two classes."""
    g = make_graph(f=40)
    g.y = g.y % 2
    g.num_classes = 2
    return g


def make_model(name: str, graph):
    torch.manual_seed(1)
    kw = dict(hidden=8, num_layers=3, dropout=0.5)
    if name == "gcn":
        model = GCN(graph.num_features, graph.num_classes, gcn_norm="graph", **kw)
        model.bind_graph(graph)
        return model
    cls = SAGE if name == "sage" else GIN
    return cls(graph.num_features, graph.num_classes, **kw)


def reference(name: str) -> tuple[torch.Tensor, dict]:
    """One process, every layer as a conv: the logits of val + test and the metrics."""
    g = binary_graph()
    model = make_model(name, g)
    nodes = torch.cat([g.val_idx, g.test_idx])
    logits = layerwise_logits(model, g, nodes, torch.device("cpu"), 7, reorder=False)
    return logits, evaluate(model, g, torch.device("cpu"), 7)


def evaluate_ranks(topo, names: tuple[str, ...]) -> dict[str, tuple[torch.Tensor, dict]]:
    """Each rank's share of the logits (reordered layers, batches of 7) and the metrics."""
    g = binary_graph()
    nodes = torch.cat([g.val_idx, g.test_idx])
    out = {}
    for name in names:
        model = make_model(name, g)
        out[name] = (layerwise_logits(model, g, nodes, torch.device("cpu"), 7),
                     evaluate(model, g, torch.device("cpu"), 7))
    return out
