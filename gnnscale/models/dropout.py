"""Dropout whose mask is a function of (seed, epoch, layer, global vertex id, channel).

Two ranks that compute the same vertex's row (a replica recomputing what its owner computes)
draw the same mask, so a partitioned forward equals the single-process one with dropout on.
The mask comes from a counter-based hash (splitmix64): on CPU the native kernel
(``csrc/dropout/``, multi-threaded, recomputing the mask in backward instead of storing it),
elsewhere the same hash vectorised in int64 torch arithmetic (wrapping multiplication, logical
shifts emulated by masking); :func:`mix64_py` is the hash on Python ints, for reference.

:func:`dropout` is the unkeyed dropout models use when no strategy keys them: the same kernel
keyed by one draw from torch's generator per call, in place of ``F.dropout``, whose
``bernoulli_`` took 40% of a sampled SAGE epoch on CPU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gnnscale.ops import dropout as ops

_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_CHUNK = 1 << 22  # elements hashed at a time (bounds the int64 temporaries)


def _signed(c: int) -> int:
    """An unsigned 64-bit constant as the int64 with the same bits."""
    return c - (1 << 64) if c >= 1 << 63 else c


def mix64_py(x: int) -> int:
    """splitmix64's finaliser of ``x + golden`` on Python ints (unsigned 64-bit)."""
    z = (x + _GOLDEN) & _MASK64
    z = ((z ^ (z >> 30)) * _M1) & _MASK64
    z = ((z ^ (z >> 27)) * _M2) & _MASK64
    return z ^ (z >> 31)


def _shr(z: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int64 bits (torch's ``>>`` is arithmetic)."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def mix64(x: torch.Tensor) -> torch.Tensor:
    """:func:`mix64_py` element-wise on an int64 tensor (bits as unsigned)."""
    z = x + _signed(_GOLDEN)
    z = (z ^ _shr(z, 30)) * _signed(_M1)
    z = (z ^ _shr(z, 27)) * _signed(_M2)
    return z ^ _shr(z, 31)


def stream_key(seed: int, epoch: int, layer: int) -> int:
    """One 64-bit key for a (seed, epoch, layer) triple, as a signed int64 value."""
    k = mix64_py(int(seed) & _MASK64)
    k = mix64_py(k ^ (int(epoch) & _MASK64))
    return _signed(mix64_py(k ^ (int(layer) & _MASK64)))


def keep_uniform(key: int, ids: torch.Tensor, dim: int) -> torch.Tensor:
    """Uniforms in [0, 1) of shape ``(len(ids), dim)``: element ``(r, c)`` depends only on
    ``key``, ``ids[r]`` and ``c`` (24 random bits, exact in float32)."""
    rows = mix64(ids.long().view(-1, 1) ^ key)  # one stream per vertex
    cols = torch.arange(1, dim + 1, dtype=torch.int64, device=ids.device) * _signed(_GOLDEN)
    out = torch.empty((ids.numel(), dim), dtype=torch.float32, device=ids.device)
    step = max(1, _CHUNK // max(dim, 1))
    for s in range(0, ids.numel(), step):
        z = mix64(rows[s : s + step] + cols - _signed(_GOLDEN))
        out[s : s + step] = _shr(z, 40).float() * (1.0 / (1 << 24))
    return out


def keyed_dropout(h: torch.Tensor, p: float, key: int, ids: torch.Tensor) -> torch.Tensor:
    """Inverted dropout of the rows of ``h`` (row ``r`` is vertex ``ids[r]``) with the mask of
    :func:`keep_uniform`: a kept element is scaled by ``1 / (1 - p)``. CPU float tensors run the
    native kernel (the same mask, bit for bit, recomputed in backward instead of stored)."""
    if ids.numel() != h.shape[0]:
        raise ValueError(f"keyed dropout got {ids.numel()} vertex ids for {h.shape[0]} rows")
    if p <= 0.0:
        return h
    if _native_ok(h):
        return _NativeDropout.apply(h, p, key, ids)
    return reference_keyed_dropout(h, p, key, ids)


def reference_keyed_dropout(h: torch.Tensor, p: float, key: int,
                            ids: torch.Tensor) -> torch.Tensor:
    """:func:`keyed_dropout` in torch arithmetic (any device; what CUDA tensors run)."""
    keep = keep_uniform(key, ids.to(h.device), h.shape[1]) >= p
    return h * keep.to(h.dtype) * (1.0 / (1.0 - p))


def dropout(h: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """Inverted dropout with a fresh mask per call, like ``F.dropout``: on CPU the native
    kernel keyed by one draw from torch's generator (reproducible under ``manual_seed`` and
    resumable from its saved state; rows keyed by position), 10-20x faster than torch's
    ``bernoulli_`` and storing no mask for backward; elsewhere ``F.dropout``."""
    if not training or p == 0.0:
        return h
    if not 0.0 < p < 1.0 or not _native_ok(h):
        return F.dropout(h, p=p, training=True)
    key = int(torch.randint(-(1 << 63), (1 << 63) - 1, (), dtype=torch.int64))
    return _NativeDropout.apply(h, p, key, None)


def _native_ok(h: torch.Tensor) -> bool:
    return h.device.type == "cpu" and h.dim() == 2 and \
        h.dtype in (torch.float32, torch.float64) and ops.available()


class _NativeDropout(torch.autograd.Function):
    """The native keyed dropout; backward applies the same mask to the gradient (it is a
    function of the key and the row ids, so nothing but the ids is saved)."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, p: float, key: int, ids: torch.Tensor | None):
        ctx.p, ctx.key = p, key
        ctx.save_for_backward(ids)
        return ops.keyed_dropout(h, p, key, ids)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (ids,) = ctx.saved_tensors
        return ops.keyed_dropout(grad, ctx.p, ctx.key, ids), None, None, None
