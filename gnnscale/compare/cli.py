"""``python scripts/compare.py RUN_DIRS... [--target-acc X] [--hardware NAME] [--out DIR]``:
one markdown table, one JSON and one figure for the runs of a sweep."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gnnscale.compare.plot import plot
from gnnscale.compare.runs import CompareError, assign_labels, check_comparable, load_run
from gnnscale.compare.table import build_rows, default_target, markdown, report


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line: run folders, ``--target-acc``, ``--hardware`` and ``--out``."""
    p = argparse.ArgumentParser(prog="compare", description=__doc__)
    p.add_argument("runs", nargs="+", help="run folders (each with results.json)")
    p.add_argument("--target-acc", type=float, default=None,
                   help="validation score to reach (default: 95%% of the best final one)")
    p.add_argument("--hardware", default=None,
                   help="profile in configs/hardware/ (name or path): adds a modelled column")
    p.add_argument("--out", type=Path, default=None,
                   help="output folder (default: <parent of the first run>/compare)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Write ``compare.md``, ``compare.json`` and the figure for the runs; 2 when they cannot
    be read or compared."""
    args = parse_args(argv)
    try:
        runs = [load_run(p) for p in args.runs]
        check_comparable(runs)
    except CompareError as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    assign_labels(runs)
    target = args.target_acc if args.target_acc is not None else default_target(runs)
    projections = None
    if args.hardware:
        from gnnscale.cost import load_profile, project_run

        profile = load_profile(args.hardware)
        projections = {r.label: project_run(r, profile).total for r in runs}
    doc = report(runs, build_rows(runs, target, projections), target,
                 args.hardware and Path(args.hardware).stem)
    out = args.out or Path(args.runs[0]).resolve().parent / "compare"
    out.mkdir(parents=True, exist_ok=True)
    table = markdown(doc)
    (out / "compare.md").write_text(table)
    (out / "compare.json").write_text(json.dumps(doc, indent=1))
    fig = plot(runs, doc, out / "compare.png")
    print(table)
    print(f"wrote {out / 'compare.md'}, {out / 'compare.json'}"
          + (f", {fig}" if fig else " (no figure: matplotlib is not installed)"))
    return 0
