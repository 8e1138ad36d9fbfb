"""16-bit features on a typed graph: ACM's accuracy with ``cache.feature_dtype`` against float32.

``python -m benchmarks.beyond_ram_dtype [--seeds 0 1 2] [--dtypes float32 float16 bfloat16]
[--jobs 2] [--out docs/results/feature_dtype_accuracy.json]``

HGB's ACM (``dataset=acm``) with the R-GCN protocol of ``scripts/typed_accuracy.py``
(``acm_rgcn_target``: the paper features, 2 relational layers of 16, full-batch, 150 epochs,
the test Macro-F1 / Micro-F1 at the epoch of best validation Macro-F1; docs/accuracy.md), one
rank, once per seed and feature dtype. The typed store rounds each type's table to the dtype
once and up-casts on gather, so a run differs from float32 only by the rounded inputs. The
results merge into ``--out`` under ``acm_rgcn_target`` (each run as it finishes; one already
there is skipped), beside the homogeneous datasets' entries.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAME = "acm_rgcn_target"
_LOCK = threading.Lock()


def _typed_accuracy():
    spec = importlib.util.spec_from_file_location("typed_accuracy",
                                                  ROOT / "scripts" / "typed_accuracy.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def one_run(dtype: str, seed: int, data_root: Path, runs: Path) -> dict:
    """One seed of the protocol at ``dtype`` in a child process (``train.py``): its selected
    test figures, epoch and seconds."""
    import subprocess

    ta = _typed_accuracy()
    over = [*ta.hgb_overrides(NAME, seed, data_root), "dist.world_size=1",
            f"cache.feature_dtype={dtype}"]
    run_dir = runs / f"{dtype}-{seed}"
    t0 = time.perf_counter()
    code = ("import json, sys; from gnnscale.api import train; "
            "from gnnscale.runner.selection import selected_record; "
            "r = train(sys.argv[2:], run_dir=sys.argv[1]); "
            "rec = selected_record(r.history, 'macro_f1', 'metric'); "
            "print('RESULT ' + json.dumps({'macro_f1': 100 * rec['test_macro_f1'], "
            "'micro_f1': 100 * rec['test_micro_f1'], 'epoch': int(rec.get('epoch', -1)), "
            "'final_train_loss': float(r.history[-1]['train_loss'])}))")
    proc = subprocess.run([sys.executable, "-c", code, str(run_dir), *over], cwd=ROOT,
                          capture_output=True, text=True)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"{dtype} seed {seed} failed:\n{proc.stderr[-2000:]}")
    return {"seed": seed, **json.loads(line[7:]), "seconds": time.perf_counter() - t0}


def merge(out: Path, dtype: str, row: dict) -> None:
    """Add one run to ``out`` (read again under a lock: runs finish concurrently)."""
    with _LOCK:
        doc = json.loads(out.read_text()) if out.exists() else {}
        entry = doc.setdefault(NAME, {})
        runs = [r for r in entry.get(dtype, []) if r["seed"] != row["seed"]]
        entry[dtype] = sorted([*runs, row], key=lambda r: r["seed"])
        out.write_text(json.dumps(doc, indent=1))


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.beyond_ram_dtype``: module docstring."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--dtypes", nargs="+", default=["float32", "float16", "bfloat16"],
                   choices=["float32", "float16", "bfloat16"])
    p.add_argument("--jobs", type=int, default=1, help="runs at once")
    p.add_argument("--data-root", default=None)
    p.add_argument("--out", default=str(ROOT / "docs/results/feature_dtype_accuracy.json"))
    args = p.parse_args(argv)
    out = Path(args.out)
    done = json.loads(out.read_text()).get(NAME, {}) if out.exists() else {}
    todo = [(d, s) for s in args.seeds for d in args.dtypes
            if s not in {r["seed"] for r in done.get(d, [])}]
    with tempfile.TemporaryDirectory(prefix="dtype-acc-") as tmp:
        data_root = Path(args.data_root or Path(tmp) / "data").absolute()
        runs = Path(tmp) / "runs"
        if todo:  # the processed copy once, before runs start at once
            first = todo.pop(0)
            merge(out, first[0], one_run(*first, data_root, runs))
            print(f"[dtype] {first}", flush=True)

        def job(item: tuple[str, int]) -> None:
            merge(out, item[0], one_run(*item, data_root, runs))
            print(f"[dtype] {item}", flush=True)

        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            list(pool.map(job, todo))
    doc = json.loads(out.read_text())[NAME]
    for d, rows in doc.items():
        mf = [r["macro_f1"] for r in rows]
        print(f"{d}: Macro-F1 {[round(x, 2) for x in mf]} mean {sum(mf) / len(mf):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
