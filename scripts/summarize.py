#!/usr/bin/env python
"""Mean +- std over seeds: ``python scripts/summarize.py RUN_DIR... [--out FILE.json]``.

Reads every ``results.json`` below the given folders (single runs or Hydra multirun sweeps,
e.g. ``python train.py -m experiment=cora_gcn seed=0,1,2,3,4``), groups the runs that differ
only in ``seed``, and prints per group the selected metric (``metric``: accuracy or ROC-AUC)
at the best validation epoch, as mean +- std over seeds, with every run kept on disk.

``--tail N`` adds the test metric averaged over each run's last N evaluated epochs: a figure
that does not hinge on one epoch picked by a small validation set (Photo's 240 validation
vertices tie at many epochs, one vertex being 0.42 points), to tell a training difference
from a selection one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from enum import Enum
from pathlib import Path
from typing import Any


def label(cfg: dict) -> str:
    """What identifies a group: dataset, model, strategy, world size."""
    ds = cfg.get("dataset", {})
    name = ds.get("name") or ds.get("preset") or ds.get("_target_", "?").rsplit(".", 1)[-1]
    model = cfg.get("model", {}).get("_target_", "?").rsplit(".", 1)[-1]
    strategy = cfg.get("strategy", {}).get("_target_", "?").rsplit(".", 1)[-1]
    if cfg.get("model", {}).get("residual"):
        model += " (residual)"
    if ds.get("feature_norm", "none") not in ("none", None):
        name += f" ({ds['feature_norm']}-normalised features)"
    if cfg.get("split_per_seed"):
        name += " (split per seed)"
    if ds.get("largest_component"):
        name += " (largest component)"
    if str(cfg.get("task", {}).get("_target_", "")).endswith(".LinkTask"):
        name += " (link prediction)"
    if cfg.get("select", "metric") != "metric":
        model += f", select={cfg['select']}"
    return f"{name} / {model} / {strategy} / {cfg.get('dist', {}).get('world_size', '?')} ranks"


def split_per_seed(run_dir: Path) -> bool:
    """Whether the run drew its random split with its own seed (``dataset.split_seed=${seed}``,
    as papers average over random splits): Hydra's ``.hydra/config.yaml`` keeps the
    interpolation that ``results.json`` resolves."""
    hydra_cfg = run_dir / ".hydra" / "config.yaml"
    return hydra_cfg.exists() and "split_seed: ${seed}" in hydra_cfg.read_text()


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def root_defaults() -> dict:
    """The top-level options' defaults (gnnscale/schema.py), so that a run written before an
    option existed (no ``select`` in its config) groups with runs leaving it at its default."""
    from gnnscale.schema import RootConfig

    root = RootConfig()
    values = {f.name: _plain(getattr(root, f.name)) for f in dataclasses.fields(root)}
    return {k: v for k, v in values.items()
            if v is not None and not (isinstance(v, str) and (v == "???" or "${" in v))}


DEFAULTS = root_defaults()
IGNORED = ("seed", "run_dir", "resume", "progress")


def key(cfg: dict) -> str:
    """The config without its seed and run folder, options it lacks at their defaults: runs
    with the same key form one group."""
    rest = {k: v for k, v in {**DEFAULTS, **cfg}.items() if k not in IGNORED}
    if cfg.get("split_per_seed"):
        rest["dataset"] = {**cfg["dataset"], "split_seed": "per seed"}
    return json.dumps(rest, sort_keys=True, default=str)


def collect(dirs: list[str]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for d in dirs:
        for path in sorted(Path(d).rglob("results.json")):
            res = json.loads(path.read_text())
            res["path"] = str(path.parent)
            if split_per_seed(path.parent):  # marked in the copy the grouping reads
                res["config"] = {**res["config"], "split_per_seed": True}
            groups.setdefault(key(res["config"]), []).append(res)
    return groups


def tail_mean(res: dict, metric: str, n: int) -> float | None:
    """The test ``metric`` (%) averaged over the run's last ``n`` evaluated epochs."""
    values = [h[f"test_{metric}"] for h in res.get("history", []) if f"test_{metric}" in h]
    return 100 * statistics.mean(values[-n:]) if values else None


def summarize(groups: dict[str, list[dict]], tail: int | None = None,
              metric: str | None = None) -> list[dict]:
    """Per group, the test figure at the selected epoch (mean +- std over seeds); ``metric``
    names another metric than the run's own (e.g. ``ap`` beside link prediction's ``auc``)."""
    rows = []
    for runs in groups.values():
        s0 = runs[0]["summary"]
        own = s0.get("metric", "acc")
        if metric is None or metric == own:
            metric_name = own
            done = [(r, r["summary"].get("test_at_best_val",
                                         r["summary"].get("test_acc_at_best_val")))
                    for r in runs]
        else:
            metric_name = metric
            done = [(r, r["summary"].get(f"test_{metric}_at_best_val")) for r in runs]
        metric_used = metric_name
        done = [(r, 100 * v) for r, v in done if v is not None]  # unfinished runs left out
        values = [v for _, v in done]
        rows.append({
            "group": label(runs[0]["config"]), "metric": metric_used, "seeds": len(values),
            "mean": statistics.mean(values) if values else None,
            "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "runs": [{"seed": r["config"].get("seed"), "value": v, "path": r["path"]}
                     for r, v in done],
        })
        if tail:
            tails = [tail_mean(r, metric_used, tail) for r, _ in done]
            for run, t in zip(rows[-1]["runs"], tails):
                run["tail"] = t
            tails = [t for t in tails if t is not None]
            rows[-1]["tail"] = {"epochs": tail, "mean": statistics.mean(tails) if tails else None,
                                "std": statistics.stdev(tails) if len(tails) > 1 else 0.0}
    distinguish(rows, [runs[0]["config"] for runs in groups.values()])
    return sorted(rows, key=lambda r: r["group"])


def _flat(cfg: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in cfg.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        elif k not in IGNORED:
            out[f"{prefix}{k}"] = v
    return out


def distinguish(rows: list[dict], configs: list[dict]) -> None:
    """Groups whose labels coincide get the options they differ in appended (``[optim.lr=0.01]``),
    so no two rows of a table (or of a merged JSON) share a name."""
    by_label: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_label.setdefault(row["group"], []).append(i)
    for same in (ix for ix in by_label.values() if len(ix) > 1):
        flats = [_flat({**DEFAULTS, **configs[i]}) for i in same]
        names = sorted({k for f in flats for k in f})
        differ = [k for k in names if len({json.dumps(f.get(k), default=str) for f in flats}) > 1]
        for i, f in zip(same, flats):
            rows[i]["group"] += " [" + ", ".join(f"{k}={f.get(k)}" for k in differ[:3]) + "]"


def merge(old: list[dict], new: list[dict]) -> list[dict]:
    """``old``'s rows with those of ``new``'s groups replaced (or added)."""
    fresh = {r["group"] for r in new}
    return sorted([r for r in old if r["group"] not in fresh] + new, key=lambda r: r["group"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="+", help="run folders or multirun sweep folders")
    p.add_argument("--out", help="write the table as JSON here")
    p.add_argument("--merge", action="store_true",
                   help="keep --out's other groups, replacing those measured again")
    p.add_argument("--metric", help="report this test metric (at the selected epoch) instead "
                   "of the run's own, e.g. ap for link prediction")
    p.add_argument("--tail", type=int, metavar="N",
                   help="also the test metric averaged over each run's last N evaluated epochs")
    args = p.parse_args(argv)
    if args.tail is not None and args.tail < 1:
        p.error(f"--tail must be >= 1, got {args.tail}")
    rows = summarize(collect(args.dirs), args.tail, args.metric)
    if not rows:
        print(f"no results.json below {', '.join(args.dirs)}", file=sys.stderr)
        return 1
    width = max(len(r["group"]) for r in rows)
    extra = f"  test, last {args.tail} epochs" if args.tail else ""
    print(f"{'group':<{width}}  metric   seeds  test at best val (mean +- std, %){extra}")
    for r in rows:
        t = r.get("tail")
        extra = f"  {t['mean']:.2f} +- {t['std']:.2f}" if t and t["mean"] is not None else ""
        print(f"{r['group']:<{width}}  {r['metric']:<7}  {r['seeds']:>5}  "
              f"{r['mean']:.2f} +- {r['std']:.2f}{' ' * 19}{extra}")
    if args.out:
        out = Path(args.out)
        if args.merge and out.exists():
            rows = merge(json.loads(out.read_text()), rows)
        out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
