"""The split domain: ``split_sample`` and ``split_sample_all`` (``csrc/split/``), the online
split of one sample. Without the extension (:mod:`gnnscale.ops._loader`) both run on their
torch-only path, :mod:`gnnscale.ops._torch_split` (the same tensors, bit for bit)."""

from __future__ import annotations

import torch

from gnnscale.ops._loader import native


def split_sample(counts: torch.Tensor, edges: list[torch.Tensor], own_in: torch.Tensor,
                 own_part: torch.Tensor, world: int, rank: int, preagg: bool,
                 costs: torch.Tensor, budget: int, num_threads: int = 0,
                 edge_pos: bool = False, read_in: bool = False) -> list[torch.Tensor]:
    """Rank ``rank``'s share of one sample split over ``world`` ranks, as a flat tensor list.

    ``counts``: vertices per layer in sampler order (targets first); ``edges``: each block's
    ``(2, E)`` local edges, input layer first; ``own_in``/``own_part``: the owner rank of each
    input-layer vertex (layer 0 / the other layers); ``costs``: 3 x (L + 1) per-layer figures
    (row communication, per-edge and per-vertex compute) of the hybrid greedy, which replicates
    at most ``budget`` rows per rank; ranks are planned on ``num_threads`` threads (0:
    ``torch.get_num_threads()``). ``edge_pos``: the list ends with one more tensor per layer,
    each local edge's position in the sample's block (to take its ``e_id`` and
    ``edge_type``); off, nothing is recorded. ``read_in``: every rank reads its layer-0
    block's sources itself, so layer 0 is not shuffled (no loaded ids; layer 0's gather, send
    index and pre-aggregation empty; excludes ``preagg``). The layout of the result is documented in
    ``csrc/split/cpu/split_sample_kernel.cpp``; ``strategies.split.splitter.split_sample``
    turns it into a ``SplitPlan``.
    """
    return native().split_sample(counts, list(edges), own_in, own_part, int(world), int(rank),
                                 bool(preagg), costs, int(budget), int(num_threads),
                                 bool(edge_pos), bool(read_in))


def split_sample_all(counts: torch.Tensor, edges: list[torch.Tensor], own_in: torch.Tensor,
                     own_part: torch.Tensor, world: int, preagg: bool, costs: torch.Tensor,
                     budget: int, num_threads: int = 0, edge_pos: bool = False,
                     read_in: bool = False) -> list[list[torch.Tensor]]:
    """Every rank's :func:`split_sample` list, rank 0 first, from one plan of the sample (a
    rank that splits a sample for all ranks plans it once, not once per rank)."""
    flat = native().split_sample_all(counts, list(edges), own_in, own_part, int(world),
                                      bool(preagg), costs, int(budget), int(num_threads),
                                      bool(edge_pos), bool(read_in))
    per = len(flat) // int(world)
    return [flat[r * per: (r + 1) * per] for r in range(int(world))]
