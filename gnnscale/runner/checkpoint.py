"""Checkpoints written atomically (temp file + rename) with every rank's RNG states.

A checkpoint holds only tensors and plain types (dicts, lists, str, int, float, bool, None), so
it is read with ``torch.load(weights_only=True)``: a planted ``checkpoint.pt`` cannot run code.
The numpy and Python RNG states are stored as tensors for that reason.

The temp file is ``.checkpoint.pt.tmp<pid>``; one left by a process that was killed while
writing is removed by the next save in that folder (:func:`sweep`), never one whose process
still runs. A run's checkpoint is checked field by field before it is used
(:func:`check_state`): a missing, mistyped or out-of-range field is a :class:`CheckpointError`
naming the file and the field.
"""

from __future__ import annotations

import errno
import hashlib
import io
import math
import os
import pickle
import random
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from gnnscale.data.publish import temp_path
from gnnscale.distributed import device as device_seam
from gnnscale.errors import UserError

FILENAME = "checkpoint.pt"
#: the fields of a run's checkpoint (:func:`check_state`); ``graph`` is optional (older runs)
FIELDS = ("model", "optimizer", "epoch", "rng", "history", "config")


class CheckpointError(UserError, RuntimeError):
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
    tmp = temp_path(path, "pt")  # a dead writer's leftovers swept first
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
    except Exception as err:  # noqa: BLE001 - a text file or garbage fails in many ways
        raise CheckpointError(f"cannot read the checkpoint {path}: {_reason(err)}; delete it "
                              "or run with resume=false") from err


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) or v is None


def _check_rng(rng: Any) -> str | None:
    """What is wrong with one rank's RNG state (:func:`rng_state`), or None."""
    if not isinstance(rng, dict):
        return f"is a {type(rng).__name__}, not a dict"
    npy, py, t = rng.get("numpy"), rng.get("python"), rng.get("torch")
    if not isinstance(t, torch.Tensor) or t.dtype != torch.uint8 or t.dim() != 1:
        return "['torch'] is not a uint8 vector (torch.get_rng_state())"
    if not (isinstance(npy, dict) and isinstance(npy.get("kind"), str)
            and isinstance(npy.get("keys"), torch.Tensor) and npy["keys"].dim() == 1
            and _is_int(npy.get("pos")) and _is_int(npy.get("has_gauss"))
            and isinstance(npy.get("cached"), (int, float))):
        return "['numpy'] lacks kind/keys/pos/has_gauss/cached or has a wrong type"
    if not (isinstance(py, dict) and _is_int(py.get("version"))
            and isinstance(py.get("internal"), torch.Tensor) and py["internal"].dim() == 1
            and (py.get("gauss_next") is None or isinstance(py.get("gauss_next"), float))):
        return "['python'] lacks version/internal/gauss_next or has a wrong type"
    return None


def _check_history(history: list, epoch: int) -> str | None:
    """What is wrong with the per-epoch records, or None."""
    if len(history) != epoch + 1:
        return f"holds {len(history)} records for epochs 0..{epoch} ({epoch + 1} expected)"
    for i, rec in enumerate(history):
        if not isinstance(rec, dict):
            return f"[{i}] is a {type(rec).__name__}, not a dict"
        if rec.get("epoch") != i or not _is_int(rec.get("epoch")):
            return f"[{i}]['epoch'] is {rec.get('epoch')!r}, expected {i}"
        for key in ("train_loss", "epoch_time"):
            if not isinstance(rec.get(key), (int, float)) or isinstance(rec.get(key), bool):
                return f"[{i}]['{key}'] is {rec.get(key)!r}, not a number"
        for key, v in rec.items():
            ok = _is_number(v) or (isinstance(v, list) and all(map(_is_number, v)))
            if not isinstance(key, str) or not ok:
                return f"[{i}][{key!r}] is {v!r}, not a number"
    return None


def check_state(state: Any, path: str | Path) -> dict[str, Any]:
    """``state`` when it is a complete run checkpoint (:data:`FIELDS`, each of the right type
    and range); otherwise :class:`CheckpointError` naming ``path`` and the field."""
    def bad(field: str, problem: str) -> CheckpointError:
        return CheckpointError(f"{path}: field {field} {problem}; it is not a checkpoint "
                               "gnnscale wrote: delete it or run with resume=false")

    if not isinstance(state, dict):
        raise bad("(top level)", f"is a {type(state).__name__}, not a dict")
    for field in FIELDS:
        if field not in state:
            raise bad(field, "is missing")
    model, optim, epoch = state["model"], state["optimizer"], state["epoch"]
    if not isinstance(model, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              for k, v in model.items()):
        raise bad("model", "is not a dict of parameter names to tensors")
    if not (isinstance(optim, dict) and isinstance(optim.get("state"), dict)
            and isinstance(optim.get("param_groups"), list)
            and all(isinstance(g, dict) for g in optim["param_groups"])):
        raise bad("optimizer", "is not an optimizer state (a dict with 'state' and "
                  "'param_groups')")
    if not _is_int(epoch) or epoch < 0:
        raise bad("epoch", f"is {epoch!r}: the last epoch trained, an integer >= 0")
    if not isinstance(state["rng"], list) or not state["rng"]:
        raise bad("rng", "is not a non-empty list of every rank's RNG states")
    for i, rng in enumerate(state["rng"]):
        problem = _check_rng(rng)
        if problem:
            raise bad(f"rng[{i}]", problem)
    if not isinstance(state["history"], list):
        raise bad("history", f"is a {type(state['history']).__name__}, not a list")
    problem = _check_history(state["history"], epoch)
    if problem:
        raise bad("history", problem)
    if not isinstance(state["config"], dict):
        raise bad("config", f"is a {type(state['config']).__name__}, not a dict")
    graph = state.get("graph")
    if graph is not None and not isinstance(graph, str):
        raise bad("graph", f"is {graph!r}, not the graph's checksum (a string)")
    threads = state.get("threads")
    if threads is not None and (not _is_int(threads) or not 1 <= threads <= 4096):
        raise bad("threads", f"is {threads!r}, not a thread count (an int in [1, 4096])")
    for i, rec in enumerate(state["history"]):
        for key in ("train_loss", "epoch_time"):
            if not math.isfinite(rec[key]):
                raise bad(f"history[{i}]['{key}']", f"is {rec[key]!r}, not finite")
    return state


def file_digest(path: str | Path) -> str:
    """The SHA-256 of a checkpoint file's bytes: two ranks' copies agree when it does."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_run(path: str | Path) -> dict[str, Any]:
    """A run's checkpoint: :func:`load`, then :func:`check_state`."""
    return check_state(load(path), path)
