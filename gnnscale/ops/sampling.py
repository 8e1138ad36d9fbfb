"""The sampling domain: ``sample_neighbors`` (``csrc/sampling/``)."""

from __future__ import annotations

import torch

from gnnscale.ops._loader import native


def sample_neighbors(indptr: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor | None,
                     seeds: torch.Tensor, fanouts: list[int], replace: bool,
                     seed: int, num_threads: int = 0
                     ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """Multi-hop neighbor sampling over a CSC graph (``indptr`` int64, ``indices`` int64/int32,
    optional float32 edge ``weights``), from int64 ``seeds``, ``fanouts[h]`` per hop (-1: all).

    Returns ``(n_id, counts, edges)``: the sampled global ids (seeds first, then each hop's new
    ones), the cumulative vertex counts after each hop (``counts[0]`` = number of seeds), and per
    hop a ``(2, E_h)`` edge list in local ids (row 0 source, row 1 destination). The draw of
    vertex ``v`` in hop ``h`` is keyed by ``(seed, h, v)``: the same ``seed`` gives the same
    sample whatever the thread count. ``num_threads``: threads to use, the caller included
    (0: ``torch.get_num_threads()`` of the calling thread). Bad inputs raise a ``RuntimeError``
    naming the argument.
    """
    return native().sample_neighbors(indptr, indices, weights, seeds, list(fanouts),
                                     bool(replace), int(seed), int(num_threads))
