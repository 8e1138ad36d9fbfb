"""The one sampling schedule every component shares: which items, which seeds, which sample seed.

A :class:`Schedule` is built once per run from the task (:meth:`Schedule.of`): its training
items (``task.train_items()``), the seeds a mini-batch of them needs (``task.seeds``) and what
the loss compares them with (``task.target``). Epoch ``e`` of stream ``s`` shuffles the items
with ``mix_seed(seed, s, e)`` (one permutation per epoch, kept) and cuts them into global
mini-batches of ``batch_size``; each step is cut into ``slots`` micro-batches (one per rank for
``data``, one per job for ``factored``, one whole batch for ``split``), every slot of step
``t`` sampled with the step's seed ``mix_seed(seed, s, e, t, 0)``: the samplers key each
vertex's draw by ``(seed, hop, vertex)``, so a vertex's sampled neighbourhood in a step is the
same whichever slot holds it, and a step cut into any number of micro-batches computes what one
process sampling the whole batch computes. Every draw is a :class:`Draw`: its items, the
task's seeds of them, and its sample seed.

Training uses stream :data:`TRAIN`; cache pre-sampling and the partitioner's sampling
frequencies use :data:`PRESAMPLE` (the same task's seeds, never the training draws), and the
``oracle`` cache replays :data:`TRAIN` exactly (:meth:`Schedule.replace` gives them the run's
schedule on their stream and with their number of slots).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

TRAIN = 0
PRESAMPLE = 1
_MASK = (1 << 62) - 1
_KEPT_EPOCHS = 1  # epochs whose permutation a schedule keeps (asked for its steps, then trained)


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


def sample_seed(seed: int, epoch: int, step: int, slot: int = 0, stream: int = TRAIN) -> int:
    """The sampler seed of micro-batch ``slot`` of step ``step``: the step's, the same for
    every slot (``slot`` does not enter, see the module's docstring; the trailing 0 keeps the
    seeds a single slot always had)."""
    del slot
    return mix_seed(seed, stream, epoch, step, 0)


class TaskDraws(Protocol):
    """What a schedule asks of a task (:class:`gnnscale.tasks.base.Task` has it; sampling does
    not import tasks)."""

    def train_items(self) -> torch.Tensor:
        """The items the schedule permutes."""

    def seeds(self, items: torch.Tensor, epoch: int) -> torch.Tensor:
        """The vertices a mini-batch of ``items`` needs output rows for."""

    def target(self, items: torch.Tensor, epoch: int) -> Any:
        """What the loss compares those rows with."""


def _same(items: torch.Tensor, epoch: int) -> torch.Tensor:
    """Node-style seeds: the items themselves."""
    return items


@dataclass(frozen=True)
class Draw:
    """One micro-batch of the schedule: slot ``slot`` of step ``step`` of ``epoch``.

    ``seeds`` and ``target`` ask the task when read (on the thread that samples or trains it:
    a task may draw work for them, e.g. link prediction's negatives)."""

    epoch: int
    step: int
    slot: int
    items: torch.Tensor
    sample_seed: int
    schedule: Schedule = field(repr=False, compare=False)

    @property
    def seeds(self) -> torch.Tensor:
        """The vertices the task needs output rows for (what the sampler starts from)."""
        return self.schedule.seeds_fn(self.items, self.epoch)

    @property
    def target(self) -> Any:
        """What the task's loss compares those rows with."""
        return self.schedule.target_of(self.items, self.epoch)


class Schedule:
    """The run's draws (see the module docstring).

    ``items``: the training items (1-D); ``seeds``/``target``: the task's functions of
    ``(items, epoch)`` (default seeds: the items themselves, node classification; no target);
    ``slots``: micro-batches per step; a last mini-batch smaller than ``max(slots, min_size)``
    is dropped (``split`` samples whole batches but keeps one target per rank).
    """

    def __init__(self, items: torch.Tensor, *, batch_size: int, seed: int, slots: int = 1,
                 stream: int = TRAIN, min_size: int = 1,
                 seeds: Callable[[torch.Tensor, int], torch.Tensor] | None = None,
                 target: Callable[[torch.Tensor, int], Any] | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if slots < 1:
            raise ValueError(f"a schedule needs at least one slot per step, got {slots}")
        if items is None or items.numel() == 0:
            raise ValueError("a schedule needs training items: the task has none (give the "
                             "graph a training split, or the task training edges)")
        if items.dim() != 1:
            raise ValueError(f"the training items must be 1-D, got shape {tuple(items.shape)}")
        self.train_items, self.batch_size, self.seed = items, int(batch_size), int(seed)
        self.slots, self.stream, self.min_size = int(slots), int(stream), int(min_size)
        self.seeds_fn = seeds if seeds is not None else _same
        self.target_fn = target
        self._epochs: OrderedDict[int, list[torch.Tensor]] = OrderedDict()
        self._lock = threading.Lock()
        #: when set, every epoch is cut to its first ``max_steps`` mini-batches (the same
        #: permutation, fewer steps): ``strategy=auto`` profiles a candidate this way
        self.max_steps: int | None = None

    @classmethod
    def of(cls, task: TaskDraws, *, batch_size: int, seed: int, slots: int = 1,
           stream: int = TRAIN, min_size: int = 1) -> Schedule:
        """The schedule of ``task``'s training items, seeds and targets."""
        return cls(task.train_items(), batch_size=batch_size, seed=seed, slots=slots,
                   stream=stream, min_size=min_size, seeds=task.seeds, target=task.target)

    def replace(self, **changes: Any) -> Schedule:
        """The same task and items with ``changes`` (``slots``, ``stream``, ``min_size``, ...)."""
        kw: dict[str, Any] = dict(batch_size=self.batch_size, seed=self.seed, slots=self.slots,
                                  stream=self.stream, min_size=self.min_size,
                                  seeds=self.seeds_fn, target=self.target_fn)
        kw.update(changes)
        return Schedule(kw.pop("items", self.train_items), **kw)

    def __repr__(self) -> str:
        return (f"Schedule({self.train_items.numel()} items, batch_size={self.batch_size}, "
                f"seed={self.seed}, slots={self.slots}, stream={self.stream})")

    # -- steps ----------------------------------------------------------------------------------
    def batches(self, epoch: int) -> list[torch.Tensor]:
        """The global mini-batches of ``epoch`` (one permutation per epoch, kept)."""
        return list(self._batches(epoch))

    def _batches(self, epoch: int) -> list[torch.Tensor]:
        """The kept list itself (callers do not change it)."""
        with self._lock:
            got = self._epochs.get(epoch)
        if got is None:
            got = epoch_batches(self.train_items, self.batch_size, self.seed, epoch, self.stream,
                                min_size=max(self.slots, self.min_size))
            with self._lock:
                self._epochs[epoch] = got
                while len(self._epochs) > _KEPT_EPOCHS:
                    self._epochs.popitem(last=False)
        return got if self.max_steps is None else got[:self.max_steps]

    def num_steps(self, epoch: int) -> int:
        """The steps (global mini-batches) of ``epoch``."""
        return len(self._batches(epoch))

    def batch(self, epoch: int, step: int) -> torch.Tensor:
        """The global mini-batch of step ``step``."""
        return self._batches(epoch)[step]

    # -- one draw -------------------------------------------------------------------------------
    def items(self, epoch: int, step: int, slot: int) -> torch.Tensor:
        """Slot ``slot``'s share of step ``step`` (contiguous, sizes differ by at most one)."""
        return micro_batch(self.batch(epoch, step), self.slots, slot)

    def seeds(self, epoch: int, step: int, slot: int) -> torch.Tensor:
        """The task's seeds of slot ``slot`` of step ``step``."""
        return self.seeds_fn(self.items(epoch, step, slot), epoch)

    def target(self, epoch: int, step: int, slot: int) -> Any:
        """The task's target of slot ``slot`` of step ``step``."""
        return self.target_of(self.items(epoch, step, slot), epoch)

    def target_of(self, items: torch.Tensor, epoch: int) -> Any:
        """The task's target of ``items`` drawn in ``epoch``."""
        if self.target_fn is None:
            raise ValueError("this schedule has no target function: build it with "
                             "Schedule.of(task, ...) to train from it")
        return self.target_fn(items, epoch)

    def sample_seed(self, epoch: int, step: int, slot: int = 0) -> int:
        """The sampler seed of slot ``slot`` of step ``step``: the step's, every slot's."""
        return sample_seed(self.seed, epoch, step, slot, self.stream)

    def draw(self, epoch: int, step: int, slot: int) -> Draw:
        """Slot ``slot`` of step ``step`` of ``epoch``."""
        return Draw(epoch, step, slot, self.items(epoch, step, slot),
                    self.sample_seed(epoch, step, slot), self)

    def draws(self, epoch: int, slots: Iterable[int] | None = None,
              steps: Iterable[int] | None = None) -> Iterator[Draw]:
        """The draws of ``slots`` (default all) of ``steps`` (default all) of ``epoch``, step by
        step and slot by slot."""
        batches = self._batches(epoch)
        slots = range(self.slots) if slots is None else list(slots)
        for step in range(len(batches)) if steps is None else steps:
            parts = torch.tensor_split(batches[step], self.slots)
            for slot in slots:
                yield Draw(epoch, step, slot, parts[slot], self.sample_seed(epoch, step, slot),
                           self)
