"""Rank functions for the traced models' tests (tests/integration/test_traced_models.py): the
models users have, unmodified (tests/_user_models.py TRACED), through each strategy's own
equivalence harness (tests/_*_fns.py), as tests/_custom_fns.py runs the explicit form."""

from __future__ import annotations

from tests import _custom_fns, _factored_fns, _offload_fns, _split_fns
from tests import _fullgraph_fns as F
from tests._user_models import TRACED

NAMES = tuple(f"user_{k}" for k in TRACED)


def every_strategy(topo, names: tuple[str, ...] = NAMES) -> dict:
    """Per model: fullgraph (depcomm; replication with keyed dropout), offload, split, data
    and factored, this rank's results."""
    part = _custom_fns.edge_cut_part(topo.world_size)
    out: dict = {}
    for name in names:
        out[name] = {
            "fullgraph": F.edge_cut_cases(topo, part, [(name, "depcomm", {}),
                                                       (name, "hybrid_replicate", {})]),
            "offload": _offload_fns.offload_cases(topo, part, [(name, dict(chunks=2))]),
            "split": _split_fns.split_cases(topo, [(name, "depcomm", False, False)],
                                           ("read",)),
            "data": _factored_fns.train_one_epoch(topo, "data", model=name),
            "factored": _factored_fns.train_one_epoch(topo, "factored", "1", model=name),
        }
    return out


#: traced models reading edge features (tests/_user_models.py TRACED_EDGES): data and
#: factored run them in tests/integration/test_edge_features.py; split, fullgraph and offload here
EDGE_NAMES = ("user_t_transformer_e", "user_t_gine", "user_t_gatv2e")


def edge_strategies(topo, names: tuple[str, ...] = EDGE_NAMES) -> dict:
    """Per model: split (tests/_split_fns.py typed_split_steps), fullgraph (depcomm,
    tests/_fullgraph_typed_fns.py) and offload (2 chunks, tests/_offload_fns.py) on a graph
    with edge features, this rank's results."""
    from tests import _fullgraph_typed_fns as T

    split = _split_fns.typed_split_steps(topo, list(names))
    full = T.strategy_epochs(topo, [(name, "depcomm", {}) for name in names])
    off = _offload_fns.offload_epochs(topo, [(name, dict(chunks=2)) for name in names])
    return {name: {"split": split[name], "fullgraph": full[i], "offload": off[i]}
            for i, name in enumerate(names)}


#: users' homogeneous models converted by PyG's to_hetero (tests/_typed_fns.py USER) and the
#: strategies that run each (batch statistics: the strategies that run whole sampled blocks)
HETERO = {"to_hetero": ("data", "factored", "split", "fullgraph", "offload"),
          "to_hetero_bn": ("data", "factored")}
HETERO_NAMES = tuple(HETERO)
#: offload's options for them: chunks, deduplicated rows, recomputed layers
HETERO_OFFLOAD = dict(chunks=2, dedup="inter+intra", intermediate="recompute")


def hetero_strategies(topo, plan: dict[str, tuple[str, ...]] = HETERO) -> dict:
    """Per converted model on the tiny typed graph, each strategy of ``plan`` it runs: data,
    factored (shared queue), split, fullgraph (depcomm, keyed dropout) and offload, this
    rank's results (each strategy's typed harness: tests/_typed_fns.py, _split_fns.py,
    _fullgraph_typed_fns.py, _offload_fns.py)."""
    from tests import _fullgraph_typed_fns as T
    from tests import _typed_fns

    runs = {"data": lambda name: _typed_fns.typed_data_steps(topo, name),
            "factored": lambda name: _typed_fns.typed_factored_steps(topo, "shared", "1", name),
            "split": lambda name: _split_fns.typed_split_steps(topo, [name])[name],
            "fullgraph": lambda name: T.strategy_epochs(topo, [(name, "depcomm", {})])[0],
            "offload": lambda name: _offload_fns.offload_epochs(topo, [(name,
                                                                       HETERO_OFFLOAD)])[0]}
    return {name: {s: runs[s](name) for s in strategies} for name, strategies in plan.items()}
