"""Quiet as a library, clear as a tool, and defaults a newcomer can trust (issue 53, items 5
and 6): a call from Python (or ``progress=false``) prints no per-epoch lines and no summary
table unless ``verbose``, while ``train.log`` in the run folder holds them; a progress bar only
on a terminal; a script piped to ``python`` trains several ranks; a missing ``model.target``
module keeps its cause; each strategy's default ``epochs`` is its own, said in the run's first
line."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gnnscale
from gnnscale import api
from gnnscale.errors import ConfigError
from gnnscale.runner.loggers.console import FILENAME, Tee, is_verbose, run_log
from gnnscale.strategies.config import declared
from tests._train import TINY

ROOT = Path(__file__).resolve().parents[2]
STRATEGIES = ("data", "split", "factored", "fullgraph", "offload")


def _epoch_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("epoch ") and " loss " in ln]


# -- the console ------------------------------------------------------------------------------
def test_verbose_follows_progress_unless_set():
    assert is_verbose({"progress": True, "verbose": None})
    assert not is_verbose({"progress": False, "verbose": None})
    assert is_verbose({"progress": False, "verbose": True})
    assert not is_verbose({"progress": True, "verbose": False})


def test_run_log_tees_prints_and_keeps_routine_lines_off_a_quiet_terminal(tmp_path, capsys):
    with run_log(tmp_path, verbose=False) as log:
        print("note: said to everyone")
        log.detail("epoch   0  loss 1.0")
        with run_log(tmp_path, verbose=False) as inner:  # a one-rank run: the same tee
            assert inner.tee is log.tee
            inner.detail("epoch   1  loss 0.5")
    assert not isinstance(sys.stdout, Tee)
    out = capsys.readouterr().out
    assert out == "note: said to everyone\n"
    assert (tmp_path / FILENAME).read_text().splitlines() == [
        "note: said to everyone", "epoch   0  loss 1.0", "epoch   1  loss 0.5"]
    with run_log(tmp_path, verbose=True) as log:
        log.detail("summary")
    assert capsys.readouterr().out == "summary\n"
    assert (tmp_path / FILENAME).read_text().endswith("summary\n")


class _Steps:
    def num_steps(self, epoch: int) -> int:
        return 4


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_progress_bar_only_on_a_terminal(monkeypatch):
    from omegaconf import OmegaConf

    from gnnscale.runner.worker import _progress

    cfg = OmegaConf.create({"progress": True})
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # piped, a log file, a notebook
    assert _progress(cfg, True, 0, _Steps()) is None
    monkeypatch.setattr(sys, "stderr", _Terminal())
    bar = _progress(cfg, True, 0, _Steps())
    assert bar is not None and bar.total == 4
    bar.close()
    assert _progress(OmegaConf.create({"progress": False}), True, 0, _Steps()) is None


# -- a run from Python ------------------------------------------------------------------------
def test_a_python_call_is_quiet_and_train_log_holds_every_line(tmp_path, capfd):
    over = [*TINY, "epochs=2", "dist.world_size=1", "checkpoint=false"]
    run = gnnscale.train(over, run_dir=tmp_path / "quiet", data_root=tmp_path / "d")
    out = capfd.readouterr().out
    assert _epoch_lines(out) == [] and "train_loss" not in out and "startup and" not in out
    log = (run.run_dir / FILENAME).read_text()
    assert len(_epoch_lines(log)) == 2, log
    assert "train_loss" in log and "startup and phases" in log and "results: " in log
    assert log.index("epoch   0") < log.index("train_loss")  # the table after the epochs

    loud = gnnscale.train(over, run_dir=tmp_path / "loud", data_root=tmp_path / "d",
                          verbose=True)
    out = capfd.readouterr().out
    assert len(_epoch_lines(out)) == 2 and "train_loss" in out
    assert len(_epoch_lines((loud.run_dir / FILENAME).read_text())) == 2
    assert api.config([*over, "verbose=true"]).verbose is True  # the override says it too


def test_a_missing_model_module_keeps_its_cause(tmp_path, caplog):
    plain = [o for o in TINY if not o.startswith("model.")]
    with pytest.raises(ConfigError, match=r"No module named 'nosuchpkg_53'") as err:
        gnnscale.train([*plain, "model=custom", "model.target=nosuchpkg_53.models.MyGNN",
                        "dist.world_size=1"], run_dir=tmp_path / "r", data_root=tmp_path / "d")
    assert "\n" not in str(err.value)
    assert not [r for r in caplog.records if r.name == "hydra.utils"]  # said once, not twice


# -- per-strategy epochs ----------------------------------------------------------------------
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_strategy_has_its_own_default_epochs(strategy):
    from gnnscale.runner.run import epochs_left, epochs_note

    cfg = api.compose([f"strategy={strategy}"])
    decl = declared(cfg.strategy)
    assert cfg.epochs == decl.default_epochs and epochs_left(cfg)
    if decl.samples:  # many optimizer steps per epoch
        assert decl.default_epochs == 3
    else:  # one step per epoch: more of them, said in the run's first line
        assert decl.default_epochs == 20
        assert epochs_note(cfg, decl).startswith(f"epochs={decl.default_epochs}: strategy="
                                           f"{strategy}'s default (each epoch is one optimizer")
    given = api.compose([f"strategy={strategy}", "epochs=5"])
    assert given.epochs == 5 and not epochs_left(given) and epochs_note(given, decl) is None


def test_an_experiment_or_a_sweep_keeps_its_own_epochs():
    assert api.compose(["experiment=cora_gcn", "strategy=fullgraph"]).epochs == 200 == \
        api.compose(["experiment=cora_gcn"]).epochs


# -- the command line and piped scripts (subprocesses) ----------------------------------------
def _train_py(tmp_path: Path, name: str, *overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "train.py", *TINY, "dist.world_size=1", "epochs=2", "checkpoint=false",
         f"data_root={tmp_path / 'd'}", f"hydra.run.dir={tmp_path / name}", *overrides],
        cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_train_py_progress_false_is_quiet_and_train_log_holds_the_run(tmp_path):
    quiet = _train_py(tmp_path, "quiet", "progress=false")
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert _epoch_lines(quiet.stdout) == [] and "train_loss" not in quiet.stdout
    log = (tmp_path / "quiet" / FILENAME).read_text()
    assert len(_epoch_lines(log)) == 2 and "train_loss" in log
    told = _train_py(tmp_path, "told", "progress=false", "verbose=true")
    assert told.returncode == 0 and len(_epoch_lines(told.stdout)) == 2
    assert "\r" not in told.stderr  # no bar: stderr is a pipe, not a terminal


@pytest.mark.slow
def test_train_py_says_a_missing_model_module_in_one_line(tmp_path):
    plain = [o for o in TINY if not o.startswith("model.")]
    proc = subprocess.run([sys.executable, "train.py", *plain, "model=custom",
                           "model.target=nosuchpkg_53.models.MyGNN", "dist.world_size=1",
                           f"data_root={tmp_path / 'd'}", f"hydra.run.dir={tmp_path / 'r'}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: model.target=nosuchpkg_53.models.MyGNN does not import: No module named "
        "'nosuchpkg_53' (give the dotted path of your nn.Module class, its package on "
        "PYTHONPATH)"], proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("how", ["dash", "redirect"])
def test_a_script_piped_to_python_trains_two_ranks(tmp_path, how):
    """``python - <<EOF`` and ``python < script.py``: ``__main__`` has no file the ranks
    could import, and they start without it (before: FileNotFoundError .../<stdin> on each
    rank and a RankFailed with no cause)."""
    script = textwrap.dedent(f"""
        import gnnscale
        run = gnnscale.train({[*TINY, "dist.world_size=2", "epochs=1", "checkpoint=false"]!r},
                             run_dir={str(tmp_path / "run")!r}, data_root={str(tmp_path / "d")!r})
        print("trained", run.summary["world_size"])
    """)
    args = [sys.executable, "-"] if how == "dash" else [sys.executable]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(args, input=script, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "FileNotFoundError" not in proc.stderr and "trained 2" in proc.stdout
    assert json.loads((tmp_path / "run" / "results.json").read_text())["summary"][
        "world_size"] == 2


def test_auto_says_its_plan_and_the_pick_trains_its_own_default_epochs(tmp_path):
    from gnnscale.strategies.auto.candidates import candidate_config
    from gnnscale.strategies.auto.strategy import _epochs, profiling_plan

    cfg = api.config([*TINY, "strategy=auto", "strategy.candidates=[data,fullgraph]"],
                     run_dir=tmp_path / "r", data_root=tmp_path / "d")
    assert _epochs(cfg) is None
    assert candidate_config(cfg, "fullgraph", tmp_path / "f", _epochs(cfg)).epochs == 20
    assert candidate_config(cfg, "data", tmp_path / "d", _epochs(cfg)).epochs == 3
    assert profiling_plan(cfg, ["data", "fullgraph"]) == (
        "[auto] profiling 2 candidates (data, fullgraph) in one launch: 3 epochs each (whole "
        "epochs; the first a warm-up; no evaluation); "
        "up to 4 more profiles if the two best are close; budget: at most "
        "20% of the run: no candidate starts once profiling has taken 0.25x the best one's "
        "projected training (strategy.profile_share), and the first candidate's profile "
        "ends at the first epoch past it whose loss is below the initial one; then the pick "
        "trains its strategy's default epochs in the same launch")
    given = api.config([*TINY, "strategy=auto", "epochs=7"], run_dir=tmp_path / "r")
    assert candidate_config(given, "fullgraph", tmp_path / "f", _epochs(given)).epochs == 7
    assert profiling_plan(given, ["data"]).endswith("then the pick trains 7 epochs in the same "
                                                    "launch")
