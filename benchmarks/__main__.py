"""Run benchmark suites: ``python -m benchmarks SUITE|all [--quick] [--out PATH]``.

(``python scripts/bench.py`` is the same command from any folder.)

Writes ``{"suite", "config", "results", "ratios", "env"}`` as JSON (to PATH, or to
PATH/<suite>.json when PATH is a folder or several suites run) and prints a table. Temp files
(PyG's generated modules, ranks' folders, those of the commands a suite times) go to a
private folder removed at exit, as a run's do.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import benchmarks
from gnnscale.distributed.guard import run_temp_dir


def flatten(d: dict, prefix: str = "") -> list[tuple[str, object]]:
    rows = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            rows += flatten(v, key + ".")
        else:
            rows.append((key, v))
    return rows


def show(report: dict) -> None:
    print(f"\n== {report['suite']} ==")
    for section in ("results", "ratios"):
        for key, value in flatten(report[section]):
            text = f"{value:.4g}" if isinstance(value, float) else str(value)
            print(f"  {section}.{key:<52} {text}")


def run_part(suite: str, part: str, run: Callable[[bool], dict], argv: list[str] | None,
             description: str) -> int:
    """``python -m benchmarks.<suite> <part> [--quick] [--out PATH]``: one part of a suite
    alone (``run(quick)``: its body), reported as suite ``<suite>-<part>``."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("part", choices=[part])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    run_temp_dir()  # PyG's generated modules, ranks' folders: removed at exit
    report = {"suite": f"{suite}-{part}", "quick": args.quick, **run(args.quick),
              "env": benchmarks.env()}
    show(report)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("suite", help=f"one of: all, {', '.join(benchmarks.suites())}")
    p.add_argument("--quick", action="store_true", help="small workload, within two minutes")
    p.add_argument("--out", default=None, help="JSON file, or folder for several suites")
    args = p.parse_args(argv)
    run_temp_dir()  # PyG's generated modules, ranks' and subprocesses' files: removed at exit
    names = [n for n in benchmarks.suites() if getattr(benchmarks.load(n), "IN_ALL", True)] \
        if args.suite == "all" else [args.suite]  # a suite with IN_ALL = False runs by name
    for name in names:
        body = benchmarks.load(name).run(quick=args.quick)
        report = {"suite": name, "quick": args.quick, **body, "env": benchmarks.env()}
        show(report)
        if args.out:
            out = Path(args.out)
            if len(names) > 1 or out.suffix != ".json":
                out = out / f"{name}{'-quick' if args.quick else ''}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(report, indent=2))
            print(f"  -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
