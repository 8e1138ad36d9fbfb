"""The one sampling schedule every component shares: which targets, which seed, per step.

Epoch ``e`` of stream ``s`` shuffles the training set with ``mix_seed(seed, s, e)`` and cuts it
into global mini-batches of ``batch_size``; with ``world_size`` ranks each batch is cut into one
micro-batch per rank, sampled with ``mix_seed(seed, s, e, step, rank)``. Training uses stream
:data:`TRAIN`; cache pre-sampling uses :data:`PRESAMPLE`, so it never repeats training draws,
and the ``oracle`` cache replays :data:`TRAIN` exactly.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

TRAIN = 0
PRESAMPLE = 1
_MASK = (1 << 62) - 1


def mix_seed(*parts: int) -> int:
    """A deterministic, well-spread 62-bit seed from integers (SplitMix64-style)."""
    h = 0x9E3779B97F4A7C15
    for p in parts:
        h = (h ^ (int(p) & _MASK)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
        h ^= h >> 31
        h = h * 0x94D049BB133111EB & 0xFFFFFFFFFFFFFFFF
        h ^= h >> 29
    return h & _MASK


def epoch_batches(train_idx: torch.Tensor, batch_size: int, seed: int, epoch: int,
                  stream: int = TRAIN, min_size: int = 1) -> list[torch.Tensor]:
    """The global mini-batches of one epoch: a seeded permutation cut into ``batch_size`` pieces.

    A last piece smaller than ``min_size`` (e.g. fewer targets than ranks) is dropped; its
    vertices come round again in other epochs' permutations.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    gen = torch.Generator().manual_seed(mix_seed(seed, stream, epoch))
    perm = train_idx[torch.randperm(train_idx.numel(), generator=gen)]
    batches = list(torch.split(perm, batch_size))
    if batches and batches[-1].numel() < min_size:
        batches.pop()
    return batches


def micro_batch(batch: torch.Tensor, world_size: int, rank: int) -> torch.Tensor:
    """Rank ``rank``'s share of a global mini-batch (contiguous, sizes differ by at most one)."""
    return torch.tensor_split(batch, world_size)[rank]


def sample_seed(seed: int, epoch: int, step: int, rank: int = 0, stream: int = TRAIN) -> int:
    """The sampler seed of one micro-batch."""
    return mix_seed(seed, stream, epoch, step, rank)


def epoch_samples(train_idx: torch.Tensor, batch_size: int, seed: int, epoch: int, *,
                  world_size: int = 1, ranks: list[int] | None = None,
                  stream: int = TRAIN) -> Iterator[tuple[int, int, torch.Tensor, int]]:
    """``(step, rank, targets, sample seed)`` of every micro-batch of ``ranks`` in one epoch."""
    ranks = list(range(world_size)) if ranks is None else ranks
    batches = epoch_batches(train_idx, batch_size, seed, epoch, stream, min_size=world_size)
    for step, batch in enumerate(batches):
        for rank in ranks:
            yield (step, rank, micro_batch(batch, world_size, rank),
                   sample_seed(seed, epoch, step, rank, stream))
