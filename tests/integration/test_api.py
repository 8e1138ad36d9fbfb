"""The Python API (``gnnscale.train``/``load_run``, docs/python-api.md, whose blocks run here):
the config train.py composes, errors as exceptions, data given from memory saved once, and
multi-rank calls that leave no process or folder behind, however often they are repeated."""

from __future__ import annotations

import multiprocessing
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

import gnnscale
from gnnscale import api
from gnnscale.data.idmap import IdMap
from gnnscale.errors import ConfigError, UserError
from gnnscale.runner.cli import CONFIGS
from tests._train import TINY, descendants

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "python-api.md"


def page_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)


def ranks_left(earlier: frozenset[int] = frozenset()) -> list[int]:
    """Processes below this one other than its fork server (which is kept, idle) and those
    ``earlier`` (there before the test began: an earlier test's, not this one's)."""
    from multiprocessing import forkserver

    server = getattr(forkserver._forkserver, "_forkserver_pid", None)
    return [p for p in descendants(os.getpid())
            if p != server and p not in earlier and _is_ours(p)]


def _is_ours(pid: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return False
    return "resource_tracker" not in cmd  # multiprocessing's, one per process, for good


def test_the_config_is_train_pys(tmp_path):
    from tests._train import make_cfg

    cfg = api.config([*TINY, "epochs=2"], run_dir=tmp_path / "run", data_root=tmp_path / "data")
    want = make_cfg(tmp_path, *TINY, "epochs=2")
    for key in ("dataset", "model", "sampler", "strategy", "optim", "dist", "task"):
        assert cfg[key] == want[key], key
    assert cfg.run_dir == str(tmp_path / "run") and cfg.data_root == str(tmp_path / "data")
    assert Path(api.config(TINY).run_dir).is_absolute()


def test_errors_are_exceptions_not_exits(tmp_path):
    with pytest.raises(ConfigError, match="did you mean sage"):
        gnnscale.train(["model=sag"], run_dir=tmp_path / "r")
    with pytest.raises(ConfigError, match="nme"):
        gnnscale.train(["dataset.nme=x"], run_dir=tmp_path / "r")
    with pytest.raises(ConfigError, match="epochs"):
        gnnscale.train([*TINY, "epochs=0"], run_dir=tmp_path / "r", data_root=tmp_path / "d")
    with pytest.raises(UserError, match="not both"):
        api.config(["dataset=cora"], data=tmp_path / "g.npz")
    with pytest.raises(UserError, match="holds no finished run"):
        gnnscale.load_run(tmp_path)
    assert os.environ["TMPDIR"] == tempfile.gettempdir()  # the caller's, as it was


def test_a_call_from_a_rank_importing_the_script_is_refused(monkeypatch):
    monkeypatch.setattr(multiprocessing.current_process(), "name", "gnnscale-rank-1")
    with pytest.raises(UserError, match="__name__"):
        gnnscale.train(TINY)


def test_data_from_memory_is_saved_once_with_its_ids(tmp_path, tiny_graph):
    rest = [o for o in TINY if not o.startswith("dataset")]
    users = np.arange(tiny_graph.num_nodes) * 10 + 7
    one = api.config(rest, data=tiny_graph, ids=users, data_root=tmp_path)
    folder = Path(one.dataset.path)
    stamp = (folder / "meta.json").stat().st_mtime_ns
    two = api.config(rest, data=tiny_graph, ids=users, data_root=tmp_path)
    assert two.dataset.path == one.dataset.path and one.dataset._target_.endswith("Saved"
                                                                                  "Dataset")
    assert (folder / "meta.json").stat().st_mtime_ns == stamp  # reused, not rewritten
    assert IdMap.load(folder).ids["node"].tolist() == users.tolist()
    plain = api.config(rest, data=tiny_graph, data_root=tmp_path)
    assert plain.dataset.path != one.dataset.path and IdMap.load(plain.dataset.path) is None
    assert api.config(rest, data=folder).dataset.path == str(folder)
    with pytest.raises(UserError, match="ids= gives 3 ids"):
        api.config(rest, data=tiny_graph, ids=[1, 2, 3], data_root=tmp_path)


@pytest.mark.skipif(not (CONFIGS / "model" / "custom.yaml").is_file(),
                    reason="model=custom is not registered in this gnnscale yet")
def test_a_model_class_trains_as_model_custom(tmp_path):
    """A user's PyG model class (tests/_user_models.py) given from Python trains as
    ``model=custom model.target=<its path>`` with its own keyword arguments."""
    from tests._user_models import GraphConvNet

    plain = [o for o in TINY if not o.startswith("model.")]  # a custom model takes its own
    run = gnnscale.train([*plain, "epochs=1", "dist.world_size=1", "progress=false"],
                         model=GraphConvNet, model_kwargs={"hidden": 16},
                         run_dir=tmp_path / "r", data_root=tmp_path / "d")
    assert run.config.model.target == "tests._user_models.GraphConvNet"
    net = [m for m in run.model.modules() if isinstance(m, GraphConvNet)]
    assert len(net) == 1 and net[0].convs[0].lin_rel.weight.shape[0] == 16


def test_a_model_that_is_no_class_is_refused(tmp_path):
    with pytest.raises(UserError, match="option name"):
        api.config(TINY, model=object())


@pytest.mark.slow
def test_a_failing_rank_raises_one_exception_naming_it(tmp_path):
    # the tiny graph has no edge weights: the ranks' samplers raise while training
    earlier = frozenset(ranks_left())  # what earlier tests of this session left is not ours
    with pytest.raises(gnnscale.RankFailed, match=r"(?s)^rank \d failed first.*no edge_weight"):
        gnnscale.train([*TINY, "dist.world_size=2", "sampler.weighted=true",
                        "progress=false"], run_dir=tmp_path / "r", data_root=tmp_path / "d")
    assert ranks_left(earlier) == []


@pytest.mark.slow
def test_the_pages_examples_run(tmp_path, monkeypatch, capsys):
    """Every block in order, as a notebook runs its cells; then the multi-rank cell again, as
    a notebook re-runs one: no rank is left and the temp folder holds nothing more."""
    monkeypatch.chdir(tmp_path)
    earlier = frozenset(ranks_left())  # what earlier tests of this session left is not ours
    temp = Path(tempfile.gettempdir())
    namespace = {"__name__": "__main__"}
    blocks = page_blocks()
    ranked = [b for b in blocks if "dist.world_size=2" in b]
    assert len(ranked) == 1
    for block in blocks:
        exec(compile(block, str(PAGE), "exec"), namespace)
        if block in ranked:
            assert ranks_left(earlier) == []
            before = sorted(p.name for p in temp.iterdir())
    out = capsys.readouterr().out
    assert "refused: optim.lr" in out, out[-2000:]
    assert namespace["run2"].summary["world_size"] == 2
    link = namespace["out"]
    assert link["pairs"]["src"].tolist() == ["user-0", "user-1"]
    assert link["top_k"]["dst"].shape == (2, 5)
    assert (Path(namespace["link"].run_dir) / "predictions" / "top_k.parquet").is_file()
    first = namespace["run2"].run_dir
    exec(compile(ranked[0], str(PAGE), "exec"), namespace)  # the cell re-run
    assert namespace["run2"].run_dir != first and namespace["run2"].summary["world_size"] == 2
    assert ranks_left(earlier) == []
    assert sorted(p.name for p in temp.iterdir()) == before
    assert os.environ["TMPDIR"] == str(temp)
