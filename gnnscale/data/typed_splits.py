"""Splits shared by the typed readers: masks or id lists of one target type, and HGB's
hold-out of part of the training nodes for validation (seeded here)."""

from __future__ import annotations

import numpy as np
import torch


def ids_of(mask_or_idx: np.ndarray, count: int, what: str) -> torch.Tensor:
    """Sorted int64 local ids from a boolean mask of ``count`` entries or an id list."""
    a = np.asarray(mask_or_idx).reshape(-1)
    if a.dtype == bool:
        if a.size != count:
            raise ValueError(f"{what} mask has {a.size} entries for {count} nodes")
        a = np.flatnonzero(a)
    if a.dtype.kind not in "iu":
        raise ValueError(f"{what} must hold integer node ids, got {a.dtype}")
    if a.size and (int(a.min()) < 0 or int(a.max()) >= count):
        raise ValueError(f"{what} holds ids in [{int(a.min())}, {int(a.max())}] but there are "
                         f"{count} nodes")
    return torch.from_numpy(np.sort(a.astype(np.int64)))


def hold_out(train: torch.Tensor, ratio: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """HGB's validation split: ``floor(ratio * len(train))`` training ids, drawn with a seeded
    permutation, become validation ids (HGB draws them unseeded with ``np.random.shuffle``).
    Returns ``(train, val)``, each sorted."""
    if not 0.0 <= ratio < 1.0:
        raise ValueError(f"val_ratio must lie in [0, 1), got {ratio}")
    order = np.random.default_rng(seed).permutation(train.numel())
    k = int(train.numel() * ratio)
    val, rest = train[torch.from_numpy(order[:k])], train[torch.from_numpy(order[k:])]
    return torch.sort(rest).values, torch.sort(val).values
