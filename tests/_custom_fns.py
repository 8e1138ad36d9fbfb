"""Rank functions for the tests of users' own models (model=custom) under every strategy: each
runs the strategies' own equivalence harnesses (tests/_*_fns.py) with the user's models."""

from __future__ import annotations

import torch

from tests import _factored_fns, _offload_fns, _split_fns
from tests import _fullgraph_fns as F

LAYER_WISE = ("user_graphconv", "user_gatv2", "user_resgin")
WHOLE_GRAPH = ("user_centered",)


def edge_cut_part(world: int) -> torch.Tensor:
    """An edge-cut of the full-graph tests' graph: vertex ``v`` on rank ``v mod world``."""
    return torch.arange(F.make_graph().num_nodes) % world


def every_strategy(topo) -> dict:
    """Per model: fullgraph (depcomm, and depcache-like replication with keyed dropout),
    offload, split, data and factored (one sampler, the other ranks train), this rank's
    results."""
    part = edge_cut_part(topo.world_size)
    out: dict = {}
    for name in LAYER_WISE:
        out[name] = {
            "fullgraph": F.edge_cut_cases(topo, part, [(name, "depcomm", {}),
                                                       (name, "hybrid_replicate", {})]),
            "offload": _offload_fns.offload_cases(topo, part, [(name, dict(chunks=2))]),
            "split": _split_fns.split_cases(topo, [(name, "depcomm", False, False)],
                                           ("read",)),
        }
    for name in (*LAYER_WISE, *WHOLE_GRAPH):
        out.setdefault(name, {})
        out[name]["data"] = _factored_fns.train_one_epoch(topo, "data", model=name)
        out[name]["factored"] = _factored_fns.train_one_epoch(topo, "factored", "1",
                                                              model=name)
    return out
