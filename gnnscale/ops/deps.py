"""The deps domain (``csrc/deps/``): the hybrid planner's greedy step and its subtrees.

``hybrid_greedy`` is NeutronStar's greedy (Algorithm 4, lines 8-15) behind ``Hybrid.plan``;
the same C++ walk runs inside ``split_sample``. ``subtree_costs`` and ``subtree_rows`` are
the per-candidate work of fullgraph's bottom-up planner (:mod:`gnnscale.deps.planner`),
``in_edges`` and ``needed_mask`` the CSC reads it and the edge-cut blocks make.
"""

from __future__ import annotations

import torch

from gnnscale.ops._loader import native


def hybrid_greedy(recompute_cost: torch.Tensor, comm_cost: torch.Tensor | float,
                  mem_bytes: torch.Tensor | None = None, budget: float | None = None,
                  mu: float = 1.0) -> torch.Tensor:
    """Bool mask (shape of ``recompute_cost``): replicate the candidates with
    ``mu * recompute_cost < comm_cost``, cheapest first (ties by position), while the running
    sum of ``mem_bytes`` stays within ``budget``; the first that does not fit ends the pass.
    ``comm_cost`` is one value or one per candidate; without ``mem_bytes`` or ``budget`` there
    is no cap."""
    t_r = torch.as_tensor(recompute_cost, dtype=torch.float64)
    t_c = torch.as_tensor(comm_cost, dtype=torch.float64)
    mem = None if mem_bytes is None else torch.as_tensor(mem_bytes, dtype=torch.float64)
    return native().hybrid_greedy(t_r, t_c, mem, None if budget is None else float(budget),
                                  float(mu))


def subtree_costs(indptr: torch.Tensor, indices: torch.Tensor, cand: torch.Tensor,
                  ok: list[torch.Tensor], dims: list[int], layer_costs: torch.Tensor,
                  edge_bytes: int, num_threads: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Per candidate layer-``k`` row (``k = len(ok) - 1``): the recomputation cost (Eq. 1) and
    the bytes of replicating it with the rows beneath it that are not available (``ok[j]``:
    bool mask of the rows available at layer ``j``; ``ok[k]``: those held). ``layer_costs``:
    3 x (L + 1) figures of :func:`gnnscale.deps.costs.layer_costs`; ``edge_bytes``: bytes of
    one replicated in-edge. Graph in CSC (``indptr`` int64, ``indices`` int64 or int32)."""
    return tuple(native().subtree_costs(indptr, indices, cand.long(), list(ok),
                                        [int(d) for d in dims], layer_costs, int(edge_bytes),
                                        int(num_threads)))


def subtree_rows(indptr: torch.Tensor, indices: torch.Tensor, cand: torch.Tensor,
                 take: torch.Tensor, ok: list[torch.Tensor],
                 num_threads: int = 0) -> list[torch.Tensor]:
    """Per layer ``j = 0..k``, the bool mask of the rows in the subtrees (as in
    :func:`subtree_costs`) of the candidates with ``take`` set."""
    return list(native().subtree_rows(indptr, indices, cand.long(), take.bool(), list(ok),
                                      int(num_threads)))


def in_edges(indptr: torch.Tensor, indices: torch.Tensor, ids: torch.Tensor,
             num_threads: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """In-edges of ``ids`` in CSC order: (int64 source, position of the destination in
    ``ids``)."""
    return tuple(native().in_edges(indptr, indices, ids.long().reshape(-1), int(num_threads)))


def needed_mask(indptr: torch.Tensor, indices: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Bool mask of the rows a conv on destinations ``ids`` reads: themselves and their
    in-neighbours."""
    return native().needed_mask(indptr, indices, ids.long().reshape(-1))
