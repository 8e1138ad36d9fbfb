"""``train.py``'s command line before and around Hydra: a misspelt option named with the closest
ones, and sweeps (``-m``) that survive a bad job.

Torch-free: it runs in the launcher before anything heavy is imported.

A sweep is checked whole before any job trains (:func:`preflight`): every job is composed with
Hydra's compose API (the jobs expanded as Hydra's ``BasicSweeper`` expands them, in its order)
and put through every check the config alone decides
(:func:`~gnnscale.runner.validate.check_config`). Each refused job is one line, ``error: job
#N (overrides): reason``; the valid ones then train (:class:`Sweep`), a job refused later (by
its dataset) or failing while training is reported the same way and the others go on, and the
sweep ends with a summary line and a non-zero status when any job did not train: 1 when one
failed while training, else 2 (only refusals). A job whose overrides do not compose at all (an
unknown key or option) refuses the whole sweep up front, status 2, as no job can be skipped
before Hydra composes them all.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import shutil
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf, open_dict

from gnnscale.errors import ConfigError, UserError
from gnnscale.paths import CONFIGS

#: Hydra's flags that take the next argument as their value.
_VALUED = {"-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir", "-c", "--cfg",
           "-p", "--package", "--experimental-rerun", "-sc", "--shell-completion"}
#: Flags after which train.py's configs are not the ones composed: no option check, no preflight.
_OTHER_CONFIGS = {"-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir",
                  "--experimental-rerun"}


def split_argv(argv: Sequence[str]) -> tuple[list[str], set[str]]:
    """``argv``'s overrides (``key=value``) and flags (``-m``, ``--cfg``, ...)."""
    overrides, flags, skip = [], set(), False
    for arg in argv:
        if skip:
            skip = False
        elif arg.startswith("-"):
            flag = arg.split("=")[0]
            flags.add(flag)
            skip = flag in _VALUED and "=" not in arg and flag not in ("-sc",)
        else:
            overrides.append(arg)
    return overrides, flags


def _parse(overrides: Sequence[str]) -> list | None:
    """Hydra's parsed overrides, or None when Hydra will report them itself (a syntax error)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_overrides(list(overrides))
    except Exception:  # noqa: BLE001 - Hydra's own message says what is wrong
        return None


def options_of(group: str, configs: Path = CONFIGS) -> list[str]:
    """The options of config group ``group`` (its YAML files), sorted."""
    return sorted(p.stem for p in (configs / group).glob("*.yaml"))


def check_options(overrides: Sequence[str], configs: Path = CONFIGS) -> None:
    """Refuse ``group=option`` (or a sweep ``group=a,b``) naming no option of a group, with the
    closest options (``did you mean fullgraph?``) rather than Hydra's listing."""
    parsed = _parse(overrides)
    if parsed is None or any(o.get_key_element().lstrip("+~").startswith("hydra.searchpath")
                             for o in parsed):
        return
    for override in parsed:
        group = override.key_or_group
        if override.is_delete() or override.package or "." in group or "/" in group \
                or not (configs / group).is_dir():
            continue
        if override.is_sweep_override():
            if not override.is_discrete_sweep():
                continue
            values = list(override.sweep_string_iterator())
        else:
            values = [override.get_value_element_as_str()]
        options = options_of(group, configs)
        for value in values:
            if value == "null" or (configs / group / f"{value}.yaml").is_file():
                continue
            close = difflib.get_close_matches(value, options, n=2, cutoff=0.6)
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            raise ConfigError(f"{group}={value} is not an option of {group}: {hint}"
                              f"(options: {', '.join(options)})")


def sweep_jobs(overrides: Sequence[str]) -> list[list[str]] | None:
    """Each job's overrides, in the order Hydra's ``BasicSweeper`` numbers them (None when a
    sweep is not a plain list of values: Hydra expands and checks it alone)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    parsed = _parse(overrides)
    if parsed is None:
        return None
    try:
        return [list(job) for job in BasicSweeper.split_arguments(parsed, None)[0]]
    except Exception:  # noqa: BLE001 - a range/interval sweep: Hydra's own message
        return None


def _job_config(cfg: DictConfig, num: int) -> DictConfig:
    """Job ``num``'s config as its task function sees it: ``run_dir`` resolved to its sweep
    folder (``hydra.sweep.dir/subdir``), the ``hydra`` node removed."""
    from hydra.core.hydra_config import HydraConfig

    with open_dict(cfg):
        cfg.hydra.job.num = num
        cfg.hydra.job.id = num
        cfg.hydra.runtime.output_dir = str(Path(str(cfg.hydra.sweep.dir)).absolute()
                                           / str(cfg.hydra.sweep.subdir))
    HydraConfig.instance().set_config(cfg)
    job = cast(DictConfig, OmegaConf.create(OmegaConf.to_container(cfg, resolve=False)))
    with open_dict(job):
        job.pop("hydra")
        job.run_dir = cfg.hydra.runtime.output_dir
    return job


def label(num: int, overrides: Sequence[str]) -> str:
    """``#N (key=value ...)``: how a job is named in the sweep's messages."""
    return f"#{num} ({' '.join(overrides)})"


def task_overrides(job: Sequence[str]) -> tuple[str, ...]:
    """A job's overrides as Hydra records them (``hydra.overrides.task``: not the ``hydra.*``
    ones): the key a job is known by from its preflight to its run."""
    return tuple(o for o in job if not o.lstrip("+~").startswith("hydra."))


def swept(jobs: list[list[str]]) -> list[tuple[str, ...]]:
    """Each job's overrides that differ between the jobs (what names a job in messages)."""
    keyed = [task_overrides(job) for job in jobs]
    varies = {i for i in range(max(map(len, keyed), default=0))
              if len({k[i] if i < len(k) else None for k in keyed}) > 1}
    return [tuple(o for i, o in enumerate(k) if i in varies) or k for k in keyed]


def preflight(jobs: list[list[str]], check: Callable[[DictConfig], Any]
              ) -> dict[tuple, tuple[str, str]]:
    """Compose every job and ``check`` it (its own output discarded: each job prints its notes
    when it runs); return the refused jobs' overrides -> (label, one line). Raise
    :class:`ConfigError` when a job does not compose (the whole sweep is refused)."""
    from gnnscale.compose import compose, session

    refused: dict[tuple, tuple[str, str]] = {}
    names = swept(jobs)
    with session(job_name="train", own=True):  # one session for every job's compose
        for num, job in enumerate(jobs):
            name = label(num, names[num])
            try:
                cfg = compose(job, return_hydra_config=True)
            except Exception as err:  # noqa: BLE001 - Hydra's message, first line
                line = str(err).strip().splitlines()[0] if str(err).strip() else repr(err)
                raise ConfigError(f"job {name} does not compose: {line} (the sweep is refused: "
                                  "no job can be skipped before Hydra composes them all)"
                                  ) from None
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    check(_job_config(cfg, num))
            except UserError as err:
                refused[task_overrides(job)] = (name, f"error: job {name}: {err}")
    return refused


class Sweep:
    """The jobs of one ``-m`` run: refused up front, trained, refused or failed while running;
    :meth:`job` is the task function's body for each, :meth:`summary` the last line."""

    def __init__(self, jobs: list[list[str]],
                 refused: dict[tuple, tuple[str, str]] | None = None) -> None:
        self.total = len(jobs)
        self.names = {task_overrides(j): label(n, s) for n, (j, s) in
                      enumerate(zip(jobs, swept(jobs)))}
        self.refused = dict(refused or {})
        self.trained: list[str] = []
        self.failed: list[str] = []
        self.refused_late: list[str] = []

    def report(self) -> None:
        """One line per job refused before any trains (stderr)."""
        for _, line in self.refused.values():
            print(line, file=sys.stderr, flush=True)
        if self.refused:
            print(f"sweep: {len(self.refused)} of {self.total} jobs refused; training the "
                  f"other {self.total - len(self.refused)}", file=sys.stderr, flush=True)

    def job(self, cfg: DictConfig, train: Callable[[DictConfig], Any]) -> None:
        """Train one job with ``train``; a refusal or a failure is reported and recorded (the
        sweep goes on); a job refused up front is skipped, its empty folder removed."""
        from hydra.core.hydra_config import HydraConfig

        hydra = HydraConfig.get()
        overrides = tuple(hydra.overrides.task)
        name = self.names.get(overrides) or label(hydra.job.num, overrides)
        if overrides in self.refused:
            _remove_if_empty(Path(hydra.runtime.output_dir))
            return
        try:
            train(cfg)
        except UserError as err:
            print(f"error: job {name}: {err}", file=sys.stderr, flush=True)
            self.refused_late.append(name)
        except Exception as err:  # noqa: BLE001 - reported, and the sweep goes on
            traceback.print_exc()
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            print(f"error: job {name} failed while training: {type(err).__name__}: {first}",
                  file=sys.stderr, flush=True)
            self.failed.append(name)
        else:
            self.trained.append(name)

    def summary(self) -> tuple[str, int]:
        """The closing line and the exit status: 0 when every job trained, 1 when one failed
        while training, else 2 (jobs refused)."""
        refused = [*(name for name, _ in self.refused.values()), *self.refused_late]
        parts = [f"sweep: {len(self.trained)} of {self.total} jobs trained"]
        if refused:
            parts.append(f"refused: {', '.join(refused)}")
        if self.failed:
            parts.append(f"failed while training: {', '.join(self.failed)}")
        status = 1 if self.failed else 2 if refused else 0
        return "; ".join(parts), status


def _remove_if_empty(folder: Path) -> None:
    """Remove a skipped job's folder when it holds only what Hydra wrote (``.hydra``, logs)."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    if all(e.name == ".hydra" or (e.is_file() and e.suffix == ".log") for e in entries):
        for e in entries:
            shutil.rmtree(e) if e.is_dir() else e.unlink()
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def sweep_first(argv: Sequence[str]) -> Sweep | None:
    """For ``-m``: every job checked before any trains, the refused ones reported (None for a
    single run, or a sweep Hydra expands alone)."""
    from gnnscale.runner.validate import check_config

    overrides, flags = split_argv(argv)
    if not flags & _OTHER_CONFIGS:
        check_options(overrides)
    if not flags & {"-m", "--multirun"} or flags & (_OTHER_CONFIGS | {"-c", "--cfg"}):
        return None
    jobs = sweep_jobs(overrides)
    if jobs is None:
        return None
    sweep = Sweep(jobs, preflight(jobs, check_config))
    sweep.report()
    return sweep
