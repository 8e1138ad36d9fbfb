"""Read run folders (``results.json``, ``metrics.jsonl``, ``.hydra/config.yaml``) and check
that they are comparable: the same dataset, model, optimizer and seed (model options each
run's strategy settled, ``results.json``'s ``settled``, may differ and are labelled)."""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# What must be equal for a comparison to be apples to apples.
FIXED_KEYS = ("dataset", "model", "optim", "seed")
# Settings that never change what is trained (where output goes, how it is shown).
IGNORED_KEYS = ("run_dir", "data_root", "progress", "checkpoint", "resume", "logger",
                "eval_batch_size", "experiment")
_SUMMARY_LINE = re.compile(r"([\d,]+) nodes, ([\d,]+) edges, ([\d,]+) features, ([\d,]+) classes,"
                           r" train ([\d,]+)")


class CompareError(ValueError):
    """Run folders that cannot be read or compared (the message says which and why)."""


@dataclass
class Run:
    """One finished training run: its config, per-epoch history, summary and graph sizes."""

    path: Path
    config: dict[str, Any]
    history: list[dict[str, float]]
    summary: dict[str, Any]
    graph: dict[str, Any] | None = None
    label: str = field(default="")
    #: model options the run's strategy chose (``auto`` values, e.g. ``model.gcn_norm``)
    settled: dict[str, Any] = field(default_factory=dict)

    @property
    def strategy(self) -> str:
        """The strategy's option name (:func:`strategy_name`), so a new strategy, in gnnscale
        or outside it, needs no change here."""
        return strategy_name(self.config)

    @property
    def metric(self) -> str:
        """Name of the validation score (the summary's ``metric``, default ``acc``)."""
        return str(self.summary.get("metric") or "acc")

    @property
    def world_size(self) -> int:
        """Ranks the run trained on (summary, else ``dist.world_size``, else 1)."""
        return int(self.summary.get("world_size") or self.config.get("dist", {}).get(
            "world_size", 1))


def load_run(path: str | Path) -> Run:
    """The run in folder ``path``; raises :class:`CompareError` when it did not finish."""
    path = Path(path)
    res_path = path / "results.json"
    if not res_path.is_file():
        raise CompareError(f"{path}: no results.json (the run did not finish, or this is not a "
                           "run folder: pass the folders a sweep wrote, e.g. multirun/.../0)")
    try:
        results = json.loads(res_path.read_text())
    except json.JSONDecodeError as e:
        raise CompareError(f"{res_path}: not valid JSON ({e})") from e
    config = results.get("config") or _hydra_config(path)
    history = _history(path) or results.get("history") or []
    if not history:
        raise CompareError(f"{path}: no epochs in metrics.jsonl or results.json")
    graph = results.get("graph") or _graph_from_log(path)
    return Run(path=path, config=config, history=history, summary=results.get("summary", {}),
               graph=graph, settled=dict(results.get("settled") or {}))


def _hydra_config(path: Path) -> dict[str, Any]:
    cfg_path = path / ".hydra" / "config.yaml"
    if not cfg_path.is_file():
        raise CompareError(f"{path}: results.json has no config and {cfg_path} is absent")
    from omegaconf import OmegaConf

    cfg = OmegaConf.to_container(OmegaConf.load(cfg_path), resolve=False)
    if not isinstance(cfg, dict):
        raise CompareError(f"{cfg_path}: not a config (a mapping of groups to options)")
    return {str(k): v for k, v in cfg.items()}


def _history(path: Path) -> list[dict[str, float]]:
    metrics = path / "metrics.jsonl"
    if not metrics.is_file():
        return []
    return [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]


def _graph_from_log(path: Path) -> dict[str, int] | None:
    """Graph sizes from the summary line the runner prints (runs older than ``graph``)."""
    log = path / "train.log"
    if not log.is_file():
        return None
    m = _SUMMARY_LINE.search(log.read_text(errors="replace"))
    if not m:
        return None
    n, e, f, c, t = (int(x.replace(",", "")) for x in m.groups())
    return {"num_nodes": n, "num_edges": e, "num_features": f, "num_classes": c, "num_train": t}


def flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}} -> {"a.b": 1}`` (lists kept whole)."""
    if not isinstance(d, dict):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def check_comparable(runs: list[Run]) -> None:
    """Refuse runs whose dataset, model, optimizer or seed differ (naming the first key); a
    model option both runs left to their strategies (``settled``, e.g. ``model.gcn_norm``)
    may differ: the runs' labels show it."""
    if not runs:
        raise CompareError("no run folders given")
    ref = runs[0]
    for key in FIXED_KEYS:
        want = flatten(ref.config.get(key), key)
        for run in runs[1:]:
            got = flatten(run.config.get(key), key)
            for sub in sorted(set(want) | set(got)):
                if sub in ref.settled and sub in run.settled:
                    continue
                if want.get(sub) != got.get(sub):
                    raise CompareError(
                        f"runs differ in {sub}: {want.get(sub)!r} in {ref.path} but "
                        f"{got.get(sub)!r} in {run.path}; a comparison needs the same "
                        f"{', '.join(FIXED_KEYS)} for every run (rerun with {sub} equal)")


def assign_labels(runs: list[Run]) -> None:
    """Label each run by its strategy plus the settings that differ between the runs
    (e.g. ``split deps=hybrid cache=degree``), so two deps/cache variants stay apart."""
    flat = [flatten({k: v for k, v in r.config.items()
                     if k not in FIXED_KEYS and k not in IGNORED_KEYS}) for r in runs]
    keys = sorted(set().union(*flat))
    varying = [k for k in keys if len({json.dumps(f.get(k), sort_keys=True) for f in flat}) > 1
               and not k.startswith("strategy.")]
    for run, f in zip(runs, flat):
        extras = []
        unread = COMPONENT_GROUPS - set(strategy_reads(run.config))
        for k in varying:
            if k.split(".")[0] in unread:
                continue  # e.g. deps= of an offload run: composed, never used
            if k.endswith("._target_"):
                extras.append(f"{k[: -len('._target_')]}={option_name(f.get(k))}")
            elif _varies_within_option(k, flat):
                extras.append(f"{k}={f.get(k)}")
        extras += [f"{k}={v}" for k, v in sorted(run.settled.items())
                   if len({json.dumps(r.settled.get(k)) for r in runs}) > 1]
        run.label = " ".join([run.strategy, *extras])
    seen: dict[str, int] = {}
    for run in runs:  # identical settings twice (e.g. repeats): number them
        seen[run.label] = seen.get(run.label, 0) + 1
        if seen[run.label] > 1:
            run.label = f"{run.label} #{seen[run.label]}"


COMPONENT_GROUPS = frozenset({"sampler", "cache", "deps", "partition"})


def strategy_class(config: dict[str, Any]) -> Any:
    """The class the run's ``strategy._target_`` names, or None when it cannot be imported
    here (a run from another version of gnnscale) or is not one the registry declares (a run
    folder's config never chooses what is imported: a strategy from outside gnnscale is then
    read by its target's name alone)."""
    from gnnscale import registry

    target = str(config.get("strategy", {}).get("_target_", ""))
    if target.startswith("gnnscale.executor."):  # runs written before strategies/<name>/
        target = "gnnscale.strategies." + target.removeprefix("gnnscale.executor.")
    if registry.declared("strategy", target) is None:
        return None
    module, _, name = target.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return None


def strategy_reads(config: dict[str, Any]) -> tuple[str, ...]:
    """The component groups the run's strategy uses (its class's ``reads``); all of them when
    the class cannot be imported here."""
    cls = strategy_class(config)
    reads = getattr(cls, "reads", None)
    return tuple(reads) if reads is not None else tuple(COMPONENT_GROUPS)


def strategy_name(config: dict[str, Any]) -> str:
    """The run's strategy option name: its class's declared ``name`` (what ``strategy=<name>``
    selects) when the class imports here, else read from its ``_target_``: the folder of the
    class's module (``gnnscale.strategies.data.DataParallel`` -> ``data``,
    ``my_strategies.replicated.strategy.Replicated`` -> ``replicated``, the layout of
    docs/adding-a-strategy.md)."""
    name = getattr(strategy_class(config), "name", None)
    if isinstance(name, str) and name:
        return name
    parts = str(config.get("strategy", {}).get("_target_", "?")).split(".")
    if len(parts) >= 3 and parts[-2] == "strategy":  # <name>/strategy.py holds the class
        return parts[-3]
    return option_name(".".join(parts))


def option_name(target: Any) -> str:
    """``gnnscale.deps.hybrid.Hybrid`` -> ``hybrid`` (the option's file name)."""
    parts = str(target).split(".")
    return parts[-2] if len(parts) >= 2 else str(target)


def _varies_within_option(key: str, flat: list[dict[str, Any]]) -> bool:
    """Whether ``key`` differs between runs that chose the same option of its group (if not,
    the option's name already says everything about it)."""
    target = f"{key.split('.')[0]}._target_"
    by_option: dict[str, set[str]] = {}
    for f in flat:
        by_option.setdefault(str(f.get(target)), set()).add(json.dumps(f.get(key)))
    return any(len(values) > 1 for values in by_option.values())
