"""Epoch plans shared by the strategies: the same global batches on every rank, seeded."""

from __future__ import annotations

import torch

_MASK = (1 << 62) - 1


def mix_seed(*parts: int) -> int:
    """A deterministic 62-bit seed from integers (SplitMix64-style mixing)."""
    h = 0x9E3779B97F4A7C15
    for p in parts:
        h = (h ^ (int(p) & _MASK)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
        h ^= h >> 31
    return h & _MASK


def epoch_batches(train_idx: torch.Tensor, batch_size: int, seed: int, epoch: int,
                  min_size: int = 1) -> list[torch.Tensor]:
    """The global mini-batches of one epoch: a seeded permutation cut into ``batch_size`` pieces.

    A last piece smaller than ``min_size`` (e.g. fewer targets than ranks) is dropped; its
    vertices come round again in other epochs' permutations.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    g = torch.Generator().manual_seed(mix_seed(seed, epoch))
    perm = train_idx[torch.randperm(train_idx.numel(), generator=g)]
    batches = list(torch.split(perm, batch_size))
    if batches and batches[-1].numel() < min_size:
        batches.pop()
    return batches
