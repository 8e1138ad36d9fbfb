"""Checkpoints written atomically (temp file + rename) with every rank's RNG states.

A checkpoint holds only tensors and plain types (dicts, lists, str, int, float, bool, None), so
it is read with ``torch.load(weights_only=True)``: a planted ``checkpoint.pt`` cannot run code.
The numpy and Python RNG states are stored as tensors for that reason.
"""

from __future__ import annotations

import errno
import io
import os
import pickle
import random
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from gnnscale.distributed import device as device_seam

FILENAME = "checkpoint.pt"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be written, or read safely; the message names the file."""


def rng_state() -> dict[str, Any]:
    """This process's torch, numpy, Python (and CUDA) RNG states as tensors and plain types."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {"kind": str(kind), "keys": torch.from_numpy(np.asarray(keys, np.int64)),
                  "pos": int(pos), "has_gauss": int(has_gauss), "cached": float(cached)},
        "python": {"version": int(version), "internal": torch.tensor(internal, dtype=torch.int64),
                   "gauss_next": gauss_next},
    }
    cuda = device_seam.rng_states()
    if cuda is not None:
        state["cuda"] = cuda
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    torch.set_rng_state(state["torch"])
    npy = state["numpy"]
    np.random.set_state((npy["kind"], npy["keys"].numpy().astype(np.uint32), npy["pos"],
                         npy["has_gauss"], npy["cached"]))
    py = state["python"]
    random.setstate((py["version"], tuple(int(v) for v in py["internal"].tolist()),
                     py["gauss_next"]))
    device_seam.set_rng_states(state.get("cuda"))


def all_rng_states(group: dist.ProcessGroup | None = None) -> list[dict[str, Any]]:
    """The RNG states of every rank of ``group``, in group-rank order (collective)."""
    if not dist.is_initialized() or dist.get_world_size(group) == 1:
        return [rng_state()]
    out: list = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, rng_state(), group=group)
    return out


def plain(obj: Any) -> Any:
    """``obj`` with Enum members (typed config choices) replaced by their values, so that
    ``weights_only`` loading accepts it; tensors and other leaves are returned as they are."""
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, dict):
        return {plain(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(plain(v) for v in obj)
    return obj


def save(path: str | Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically: readers see the old or the new file, never half.

    On failure (disk full, no permission) the temp file is removed and :class:`CheckpointError`
    names the path and the reason; an existing checkpoint is left as it was.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        buf = io.BytesIO()
        torch.save(plain(state), buf)  # serialise first: the write below reports its own errno
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(buf.getbuffer())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise CheckpointError(f"cannot write the checkpoint {path}: {_reason(err)}; the previous "
                              "checkpoint (if any) is unchanged") from err


def _reason(err: BaseException) -> str:
    code = getattr(err, "errno", None)
    if code in (errno.ENOSPC, errno.EDQUOT):
        return f"{os.strerror(code)} (free space on that disk or set run_dir elsewhere)"
    if code is not None:
        return os.strerror(code)
    return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"


def load(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint with ``weights_only=True``; refuse a file that needs arbitrary code."""
    path = Path(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise CheckpointError(
            f"{path} is not a checkpoint gnnscale can load safely: it holds objects that only "
            "an unrestricted unpickler would build (it may have been planted or written by an "
            "older gnnscale). It was not loaded; delete it and train from the start, or run "
            "with resume=false"
        ) from err
    except (OSError, RuntimeError, EOFError) as err:
        raise CheckpointError(f"cannot read the checkpoint {path}: {_reason(err)}; delete it "
                              "or run with resume=false") from err
