"""Every strategy's typed equivalence run in one spawn per world size (module level, so spawn
can import it): the typed tests of data, factored, split, fullgraph and offload read their part
of :func:`runs`, so the ranks start once for 2 ranks and once for 4, not once per strategy;
:func:`reference` computes each one-process reference once.

:data:`PLANS` says what each world size runs: on 2 ranks every case of the typed tests (every
typed model under data; R-GCN, R-GAT, GAT with edge_dim and GINE under split; the full-graph
deps, the vertex cut and the offload options); on 4 ranks the tiny typed graph's own models (R-GCN
with its featureless type's sparse table, R-GAT reading the typed edge features) under each
strategy, the full graph on an edge cut and on the vertex cut, and factored with both queues.
The other typed models stay on 2 ranks: HGAT's ``lin_dst`` has an exactly zero gradient (a
softmax over a destination's in-edges ignores what is constant per destination), whose rounding
noise Adam scales to learning-rate-sized steps, and 4 ranks sum that noise in another order.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from gnnscale.distributed import spawn
from tests import _fullgraph_typed_fns, _offload_fns, _split_fns, _typed_fns

#: fullgraph cases ``(model, deps, strategy options)`` on 2 ranks
FULLGRAPH = [
    ("rgcn", "depcache", {}),
    ("rgcn", "depcomm", {}),  # overlapped: split by destination, encoded rows exchanged
    ("rgcn", "hybrid", {"overlap": False}),  # some rows replicated, some sent (shuffle)
    ("rgcn", "depcomm", {"vertex_cut": True}),  # R-GCN split: partial sums per relation
    ("rgat", "depcomm", {}),  # typed edge features and a featureless type
    ("gat_edge", "depcomm", {}),
    ("gat_edge", "depcache", {}),
    ("gine", "depcomm", {"overlap": False}),
]
#: offload cases ``(model, options)`` on 2 ranks
OFFLOAD = [
    ("rgcn", dict(chunks=3, dedup="inter+intra", reorganize=True, intermediate="recompute")),
    ("rgcn", dict(chunks=2, dedup="none", intermediate="auto")),  # layer 1 by the rule
    ("rgat", dict(chunks=2, dedup="inter", intermediate="recompute")),  # typed edge features
    ("gat_edge", dict(chunks=3, dedup="inter+intra", intermediate="recompute")),
    ("gine", dict(chunks=2, dedup="inter", reorganize=True, intermediate="recompute")),
]
#: factored ``(queue, samplers)`` on 4 ranks: 3 trainers on the shared queue, 2 on routes
FACTORED = [("shared", "1"), ("routes", "2")]

PLANS: dict[int, dict[str, list]] = {
    2: {"data": [*_typed_fns.MODELS, "rgat", "simplehgn"],
        "split": ["rgcn", "rgat", "gat_edge", "gine"], "fullgraph": FULLGRAPH,
        "offload": OFFLOAD},
    4: {"data": ["rgcn", "rgat"], "split": ["rgcn", "rgat"],
        "fullgraph": [FULLGRAPH[1], FULLGRAPH[3], FULLGRAPH[4]],
        "offload": [OFFLOAD[0], OFFLOAD[2]], "factored": FACTORED},
}


def _factored(topo, cases: list[tuple[str, str]]) -> list[dict]:
    return [_typed_fns.typed_factored_steps(topo, queue, samplers) for queue, samplers in cases]


RUNS = {"data": lambda topo, models: _typed_fns.typed_data_steps_of(topo, tuple(models)),
        "split": _split_fns.typed_split_steps, "fullgraph": _fullgraph_typed_fns.strategy_epochs,
        "offload": _offload_fns.offload_epochs, "factored": _factored}


def every_strategy(topo, plan: dict[str, list]) -> dict[str, Any]:
    """On this rank, each strategy's run of its cases in ``plan``, in turn."""
    return {name: RUNS[name](topo, cases) for name, cases in plan.items()}


_RUNS: dict[int, list[dict[str, Any]] | Exception] = {}


def runs(world: int) -> list[dict[str, Any]]:
    """Per rank (rank order), every strategy's results on ``world`` ranks (:data:`PLANS`);
    spawned once per world size and session, a failure too (each test reading it fails at
    once instead of spawning, and maybe waiting out the timeout, again)."""
    if world not in _RUNS:
        try:
            _RUNS[world] = spawn(every_strategy, world, PLANS[world], timeout_s=420.0)
        except Exception as err:  # noqa: BLE001 - kept, and re-raised by every reader
            _RUNS[world] = err
    got = _RUNS[world]
    if isinstance(got, Exception):
        raise RuntimeError(f"the typed tests' {world}-rank spawn failed: {got}") from got
    return got


@cache
def reference(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, a one-process reference, once per session (the fullgraph and offload
    ones serve 2 and 4 ranks alike)."""
    return fn(*args)
