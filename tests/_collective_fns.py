"""Rank functions of tests/distributed/test_collectives.py (importable: spawn pickles them)."""

from __future__ import annotations

import torch

from gnnscale.distributed.collectives import all_gather_rows, gather_rows


def gathered(topo, sizes: list[int], width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank r's part is ``sizes[r]`` rows of ``width`` columns, each entry ``r * 1000 + i``
    (its row ``i``); both gathers of them, one buffer and the list's concatenation."""
    n = sizes[topo.rank]
    part = (topo.rank * 1000 + torch.arange(n, dtype=torch.float32)).repeat(width, 1).T
    part = part.reshape(n, width).contiguous()
    return gather_rows(part), torch.cat(all_gather_rows(part))
