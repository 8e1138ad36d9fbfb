"""gnnscale: config-driven, multi-strategy GNN training for graphs that outgrow one device.

From Python (docs/python-api.md): ``gnnscale.train(overrides=[...])`` trains as ``train.py``
does and returns a :class:`~gnnscale.api.Run`; ``gnnscale.load_run(run_dir)`` opens a finished
one. These load on first use: importing ``gnnscale`` imports nothing heavy (the check of the
installed torch and Python against the ranges pyproject.toml declares reads package metadata,
not torch).
"""

import os
import re
import sys

from gnnscale.lazy import lazy_exports

__version__ = "0.1.0"
__all__ = ["Run", "RankFailed", "load_run", "shutdown", "train"]

__getattr__ = lazy_exports(__name__, {"train": "gnnscale.api", "load_run": "gnnscale.api",
                                      "Run": "gnnscale.api", "shutdown": "gnnscale.api",
                                      "RankFailed": "gnnscale.distributed.launch"})

_RANGE_WARNED = "GNNSCALE_RANGE_WARNED"  # set once said: child ranks stay quiet


def _release(version: str) -> tuple[int, ...]:
    """The numeric release of a version string: "2.13.0+cpu" -> (2, 13, 0)."""
    m = re.match(r"\d+(\.\d+)*", version.strip())
    return tuple(int(x) for x in m.group(0).split(".")) if m else ()


def _satisfies(version: tuple[int, ...], spec: str) -> bool:
    """Whether ``version`` meets every ``>=``/``<``/``<=``/``>``/``==`` clause of ``spec``."""
    ops = {">=": lambda a, b: a >= b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
           ">": lambda a, b: a > b, "==": lambda a, b: a == b}
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        m = re.match(r"(>=|<=|==|<|>)\s*([\d.]+)", clause)
        if m:
            want = _release(m.group(2))
            n = max(len(version), len(want))
            have, want = version + (0,) * (n - len(version)), want + (0,) * (n - len(want))
            if not ops[m.group(1)](have, want):
                return False
    return True


def supported_ranges() -> tuple[str, str] | None:
    """(torch range, Python range) as the installed package's metadata declares them
    (pyproject.toml); None when gnnscale runs from a folder without install metadata."""
    from importlib import metadata

    try:
        meta = metadata.metadata("gnnscale")
        requires = metadata.requires("gnnscale") or []
    except metadata.PackageNotFoundError:
        return None
    torch_spec = next((r[len("torch"):].split(";")[0].strip() for r in requires
                       if re.match(r"torch\s*[<>=!~]", r)), "")
    return torch_spec, meta.get("Requires-Python") or ""


def check_versions() -> str | None:
    """One line when the running torch or Python is outside the supported ranges, else None."""
    from importlib import metadata

    ranges = supported_ranges()
    if ranges is None:
        return None
    torch_spec, py_spec = ranges
    problems = []
    py = ".".join(map(str, sys.version_info[:3]))
    if py_spec and not _satisfies(sys.version_info[:3], py_spec):
        problems.append(f"Python {py} (supported: {py_spec})")
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "gnnscale: torch is not installed: install torch first (pip install torch)"
    if torch_spec and not _satisfies(_release(torch_version), torch_spec):
        problems.append(f"torch {torch_version} (supported: {torch_spec})")
    if not problems:
        return None
    return (f"gnnscale: untested versions: {' and '.join(problems)}; it may fail, and the "
            "native extension must be rebuilt for it (python -m gnnscale.native build)")


def _warn_versions() -> None:
    if os.environ.get(_RANGE_WARNED) == "1":
        return
    try:
        line = check_versions()
    except Exception:  # noqa: BLE001 - a check must never stop an import
        return
    if line:
        print(line, file=sys.stderr, flush=True)
        os.environ[_RANGE_WARNED] = "1"


_warn_versions()
