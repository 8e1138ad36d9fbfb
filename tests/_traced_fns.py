"""Rank functions for the traced models' tests (tests/test_traced_models.py): the models users
have, unmodified (tests/_user_models.py TRACED), through each strategy's own equivalence
harness (tests/_*_fns.py), as tests/_custom_fns.py runs the explicit form."""

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
