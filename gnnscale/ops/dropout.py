"""The dropout domain: ``keyed_dropout`` (``csrc/dropout/``)."""

from __future__ import annotations

import torch

from gnnscale.ops._loader import available as _available
from gnnscale.ops._loader import native


def keyed_dropout(h: torch.Tensor, p: float, key: int, ids: torch.Tensor | None = None,
                  num_threads: int = 0) -> torch.Tensor:
    """Inverted dropout of a 2-D float CPU tensor: element ``(r, c)`` is kept (and scaled by
    ``1 / (1 - p)``) when a splitmix64 hash of (``key``, ``ids[r]`` or ``r`` without ids,
    ``c``) clears ``p``; the mask of :func:`gnnscale.models.dropout.keep_uniform`, bit for bit.
    ``key`` is a signed 64-bit integer; ``num_threads`` as in :func:`gather_rows`."""
    return native().keyed_dropout(h, float(p), int(key), ids, int(num_threads))


def available() -> bool:
    """Whether the native extension (and so this op) is built."""
    return _available()
