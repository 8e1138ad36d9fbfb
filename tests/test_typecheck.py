"""mypy on the package, with the config of ``pyproject.toml``'s ``[tool.mypy]`` (lenient:
packages without type information are Any): the modules :data:`CLEAN` names at zero errors,
every other file at most the count ``tests/mypy_baseline.json`` records, so the count only
goes down. ``python tests/test_typecheck.py`` rewrites the baseline from the package as it is
(after fixing errors, to hold the lower counts)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "tests" / "mypy_baseline.json"
#: modules held at zero errors (those issue 51 touched)
CLEAN = tuple(f"gnnscale/{m}.py" for m in (
    "registry", "partition/book", "partition/cli", "partition/part_files", "partition/parts",
    "partition/quality", "partition/vc_parts", "runner/cli", "runner/prepare", "runner/validate",
    "strategies/auto/__init__", "strategies/auto/candidates", "strategies/auto/choice",
    "strategies/auto/config", "strategies/auto/strategy", "data/__init__", "data/base",
    "data/bounded", "data/checks", "data/convert", "data/custom", "data/entities", "data/graph",
    "data/hetero_sim", "data/heterophilous", "data/hgb", "data/magnn", "data/npz", "data/ogb",
    "data/ogb_mag", "data/ogbl", "data/pages", "data/paper_graphs", "data/planetoid",
    "data/presets", "data/processed", "data/publish", "data/safe_pickle", "data/saved",
    "data/schemas", "data/synthetic", "data/typed_input", "data/typed_splits", "sampling/__init__",
    "sampling/base", "sampling/codec", "sampling/full", "sampling/gather", "sampling/neighbor",
    "sampling/prefetch", "sampling/random_walk", "sampling/schedule", "sampling/schemas",
    "sampling/workers", "deps/__init__", "deps/base",
    "deps/costs", "deps/depcache", "deps/depcomm", "deps/hybrid", "deps/pipeline", "deps/planner",
    "deps/schemas", "deps/shuffle", "partition/__init__", "partition/__main__", "partition/_graph",
    "partition/_rebalance", "partition/_stream", "partition/_vertex_cut", "partition/base",
    "partition/cvc", "partition/fennel", "partition/hvc", "partition/iec", "partition/layout",
    "partition/ldg", "partition/metis", "partition/oec", "partition/provider", "partition/random",
    "partition/range", "partition/schemas", "partition/store", "evaluation/__init__",
    "evaluation/evaluate", "evaluation/footprint", "evaluation/owned", "cost/__init__",
    "cost/model", "cost/papers", "cost/profile", "cost/volumes", "compare/__init__",
    "compare/__main__", "compare/cli", "compare/plot", "compare/runs", "compare/table",
))
ERROR = re.compile(r"^(gnnscale/\S+\.py):\d+: error: ")


def mypy_errors() -> Counter:
    """Errors per file of the package, as ``make lint`` runs mypy."""
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    if proc.returncode not in (0, 1):  # 1: errors found; 2: mypy itself failed
        raise RuntimeError(f"mypy did not run (status {proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return Counter(m.group(1) for line in proc.stdout.splitlines()
                   if (m := ERROR.match(line)))


@pytest.fixture(scope="module")
def errors() -> Counter:
    pytest.importorskip("mypy", reason="mypy is not installed: pip install -e '.[test]'")
    return mypy_errors()


def test_touched_modules_have_no_type_errors(errors):
    assert all((ROOT / m).is_file() for m in CLEAN), [m for m in CLEAN if not (ROOT / m).is_file()]
    dirty = {m: errors[m] for m in CLEAN if errors[m]}
    assert not dirty, f"mypy errors in modules held at zero (run: python -m mypy): {dirty}"


def test_no_file_has_more_type_errors_than_its_baseline(errors):
    baseline = json.loads(BASELINE.read_text())
    grown = {f: f"{n} > {baseline.get(f, 0)}" for f, n in sorted(errors.items())
             if n > baseline.get(f, 0)}
    assert not grown, ("more mypy errors than tests/mypy_baseline.json allows (run: python -m "
                       f"mypy, and fix the new ones): {grown}")


def test_the_error_pattern_reads_mypy_lines():
    line = 'gnnscale/a/b.py:12: error: Item "None" of "X | None" has no attribute "y"  [union-attr]'
    assert ERROR.match(line).group(1) == "gnnscale/a/b.py"
    assert ERROR.match("gnnscale/a/b.py:12: note: Right operand is of type") is None


if __name__ == "__main__":
    counts = mypy_errors()
    BASELINE.write_text(json.dumps(dict(sorted(counts.items())), indent=1) + "\n")
    print(f"{sum(counts.values())} errors in {len(counts)} files -> {BASELINE}")
