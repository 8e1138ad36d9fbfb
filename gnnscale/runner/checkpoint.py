"""Checkpoints written atomically (temp file + rename) with every rank's RNG states."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

FILENAME = "checkpoint.pt"


def rng_state() -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
             "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def all_rng_states(group: dist.ProcessGroup | None = None) -> list[dict[str, Any]]:
    """The RNG states of every rank of ``group``, in group-rank order (collective)."""
    if not dist.is_initialized() or dist.get_world_size(group) == 1:
        return [rng_state()]
    out: list = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, rng_state(), group=group)
    return out


def save(path: str | Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically: readers see the old or the new file, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    torch.save(state, tmp)
    os.replace(tmp, path)


def load(path: str | Path) -> dict[str, Any]:
    return torch.load(path, map_location="cpu", weights_only=False)
