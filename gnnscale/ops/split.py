"""The split domain: ``split_sample`` (``csrc/split/``), the online split of one sample."""

from __future__ import annotations

import torch

from gnnscale.ops._loader import native


def split_sample(counts: torch.Tensor, edges: list[torch.Tensor], own_in: torch.Tensor,
                 own_part: torch.Tensor, world: int, rank: int, preagg: bool,
                 costs: torch.Tensor, budget: int, num_threads: int = 0) -> list[torch.Tensor]:
    """Rank ``rank``'s share of one sample split over ``world`` ranks, as a flat tensor list.

    ``counts``: vertices per layer in sampler order (targets first); ``edges``: each block's
    ``(2, E)`` local edges, input layer first; ``own_in``/``own_part``: the owner rank of each
    input-layer vertex (layer 0 / the other layers); ``costs``: 3 x (L + 1) per-layer figures
    (row communication, per-edge and per-vertex compute) of the hybrid greedy, which replicates
    at most ``budget`` rows per rank; ranks are planned on ``num_threads`` threads (0:
    ``torch.get_num_threads()``). The layout of the result is documented in
    ``csrc/split/cpu/split_sample_kernel.cpp``; ``strategies.split.splitter.split_sample``
    turns it into a ``SplitPlan``.
    """
    return native().split_sample(counts, list(edges), own_in, own_part, int(world), int(rank),
                                 bool(preagg), costs, int(budget), int(num_threads))
