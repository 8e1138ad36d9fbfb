"""Tasks declare themselves torch-free (``tasks/<name>/config.py``): what they need of a dataset,
their checks, their metrics and how each reduces over ranks; the runner reduces a run's metrics
as its task and strategy declare, and no ``task_name`` string switch is left."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gnnscale.data.metadata import DatasetMeta
from gnnscale.errors import ConfigError
from gnnscale.runner.metrics import declared_reductions, reduction, summary_columns
from gnnscale.schema import Reduce
from gnnscale.tasks.config import declared_task
from gnnscale.tasks.link.config import LinkTaskConfig
from gnnscale.tasks.node.config import NodeTaskConfig
from tests._train import TINY, make_cfg

ROOT = Path(__file__).resolve().parents[2]


def test_the_declarations_of_task_and_strategy_decide_each_reduction(tmp_path):
    """The same figure reduces as the run's strategy declares it (split: ``edge_skew`` the
    busiest rank's) or, undeclared (data), by its name; the link task's pair bytes are its
    own declaration; a declaration overrides the name rule (factored's summed ``*_time``)."""
    split = declared_reductions(make_cfg(tmp_path, *TINY, "task=link", "strategy=split"))
    data = declared_reductions(make_cfg(tmp_path, *TINY, "strategy=data"))
    factored = declared_reductions(make_cfg(tmp_path, *TINY, "strategy=factored"))
    assert reduction("edge_skew", split) == Reduce.max
    assert reduction("edge_skew", data) == Reduce.sum
    assert reduction("local_edge_ratio", split) == Reduce.mean
    assert split["bytes_pair_exchange"] == Reduce.sum and "bytes_pair_exchange" not in data
    assert reduction("sampler_busy_time", factored) == Reduce.sum
    assert reduction("sampler_busy_time", data) == Reduce.mean
    assert reduction("epoch_time", data) == Reduce.max == reduction("peak_memory", data)
    columns = summary_columns(make_cfg(tmp_path, *TINY, "task=link", "strategy=split"))
    assert "val_auc" in columns and "val_acc" not in columns and "edge_skew" in columns


def test_declared_task_is_found_from_the_config(tmp_path):
    assert declared_task(make_cfg(tmp_path, *TINY)) is NodeTaskConfig
    assert declared_task(make_cfg(tmp_path, *TINY, "task=link")) is LinkTaskConfig
    assert declared_task({}) is NodeTaskConfig  # a config without a task group
    assert LinkTaskConfig.derives_data and not NodeTaskConfig.derives_data
    assert LinkTaskConfig.auto_rankable and NodeTaskConfig.auto_rankable  # strategy=auto ranks both


def test_a_training_vertex_per_rank_only_where_each_rank_trains_its_own():
    """The node task refuses fewer training vertices than ranks when the strategy gives each
    rank items of its own (``items_per_rank``), and an empty training set always."""
    from gnnscale.strategies.data.config import DataParallelConfig
    from gnnscale.strategies.fullgraph.config import FullGraphConfig

    meta = DatasetMeta(name="g", num_nodes=10, num_edges=20, num_features=4, num_classes=2,
                       num_train=1, has_features=True, has_labels=True, has_train=True)
    assert DataParallelConfig.items_per_rank and not FullGraphConfig.items_per_rank
    cfg = {"dataset": {"name": "g"}}
    NodeTaskConfig.check_data(cfg, meta, ranks=1)
    with pytest.raises(ConfigError, match="use at most 1 ranks"):
        NodeTaskConfig.check_data(cfg, meta, ranks=2)
    with pytest.raises(ConfigError, match="lacks labels"):
        NodeTaskConfig.check_data(cfg, DatasetMeta(**{**meta.__dict__, "has_labels": False}))
    with pytest.raises(ConfigError, match="is empty"):
        NodeTaskConfig.check_data(cfg, DatasetMeta(**{**meta.__dict__, "num_train": 0}))
    LinkTaskConfig.check_data(cfg, DatasetMeta(**{**meta.__dict__, "has_labels": False}))
    with pytest.raises(ConfigError, match="link prediction needs features"):
        LinkTaskConfig.check_data(cfg, DatasetMeta(**{**meta.__dict__, "has_features": False}))


def test_declarations_are_read_without_torch():
    code = ("import sys; from omegaconf import OmegaConf; from gnnscale import registry; "
            "from gnnscale.tasks.config import declared_task; "
            "from gnnscale.strategies.config import declared; "
            "cfg = OmegaConf.create({'task': registry.option('task', 'link')}); "
            "d = declared_task(cfg); declared(registry.option('strategy', 'split')); "
            "assert d.name == 'link' and d.metric_reductions(), d; "
            "assert 'torch' not in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_no_module_switches_on_a_task_name_string():
    """Every decision asks the task's declarations: ``task_name`` is gone everywhere."""
    here = Path(__file__).resolve()
    found = [str(p.relative_to(ROOT)) for folder in ("gnnscale", "tests", "benchmarks", "scripts")
             for p in (ROOT / folder).rglob("*.py")
             if p != here and re.search(r"\btask_name\b", p.read_text())]
    found += [n for n in ("train.py",) if re.search(r"\btask_name\b", (ROOT / n).read_text())]
    assert not found, found


def test_parts_support_is_what_strategy_and_task_declare(tmp_path):
    """``parts_problem`` reads ``from_parts`` of the strategy and the task (and what the
    strategy needs of the layout), never their names: a strategy or task declared here, in no
    folder of the package, gets its answer from its declarations alone."""
    from gnnscale.runner.validate import parts_problem
    from gnnscale.strategies.config import Checked, StrategyConfig, declared
    from gnnscale.tasks.config import TaskConfig

    class Whole(StrategyConfig):
        name = "whole"

    class Owned(StrategyConfig):
        name, samples, from_parts = "owned", False, True

    class Sampled(StrategyConfig):
        name, from_parts = "sampled", True

    class Toy(TaskConfig):
        name = "toy"

    class ToyFromParts(TaskConfig):
        name, from_parts = "toyparts", True

    cfg = make_cfg(tmp_path, *TINY)
    built = Checked.build(cfg)
    msg = Whole.parts_problem(cfg, built)
    assert msg.startswith("strategy=whole reads the whole graph on every rank") and \
        "strategy=data, strategy=factored, strategy=fullgraph, strategy=offload or " \
        "strategy=split" in msg, msg
    assert Owned.parts_problem(cfg, built) is None and Sampled.parts_problem(cfg, built) is None
    vcut = make_cfg(tmp_path, *TINY, "partitioner=cvc")
    assert Owned.parts_problem(vcut, built) is None  # it reads its own part only
    assert "a vertex-cut layout does not hold" in Sampled.parts_problem(vcut, built)
    assert Toy.parts_problem() == ("task=toy cannot train from parts=: it is not trained from "
                                   "parts= yet; use task=node, or drop parts=")
    assert ToyFromParts.parts_problem() is None
    assert "edge split and message graph" in LinkTaskConfig.parts_problem()
    assert NodeTaskConfig.parts_problem() is None

    for over, expect in (((), None), (("strategy=auto",), "strategy=auto reads the whole"),
                         (("task=link",), "task=link cannot train from parts="),
                         (("strategy=fullgraph", "deps=hybrid"), "fullgraph needs deps=depcomm"),
                         (("strategy=fullgraph", "deps=depcomm"), None),
                         (("strategy=offload",), None),
                         (("strategy=split", "partitioner=cvc"), "vertex-cut layout")):
        run = make_cfg(tmp_path, *(o for o in TINY if not o.startswith("strategy.")), *over)
        got = parts_problem(run, Checked.build(run))
        assert (got is None) if expect is None else (expect in got), (over, got)
        assert declared(run.strategy).from_parts == (over[:1] != ("strategy=auto",))


#: comparisons with a strategy's or task's name allowed outside its own folder, with why
NAME_SWITCHES_ALLOWED = {
    # the papers' speed-ups are over their data-parallel baseline run: a row of a comparison
    # picked to divide by, not a question of what a strategy can do
    "gnnscale/cost/papers.py",
}


def name_switches(root: Path, names: set[str]) -> list[str]:
    """``file:line: code`` of each comparison of a strategy's or task's name (a string of
    ``names``, or a literal collection of them) with an expression about a strategy, task, name
    or kind, in the package outside the named option's own folder; and of each literal
    collection of two or more such names (a list to test a name against)."""
    import ast

    about = re.compile(r"strateg|task|\bname\b|\bkind\b")

    def strings(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return [v for e in node.elts for v in strings(e)]
        return []

    found = []
    for path in sorted((root / "gnnscale").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in NAME_SWITCHES_ALLOWED:
            continue
        src = path.read_text()
        parts = rel.split("/")
        own = {parts[2]} if len(parts) > 3 and parts[1] in ("strategies", "tasks") else set()
        for node in ast.walk(ast.parse(src)):
            hits: set[str] = set()
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                named = {v for s in sides for v in strings(s)} & names
                if named and any(about.search(ast.get_source_segment(src, s) or "")
                                 for s in sides if not strings(s)):
                    hits = named
            elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                values = strings(node)
                if len(values) >= 2 and len(values) == len(node.elts) and set(values) <= names:
                    hits = set(values)
            if hits - own:
                found.append(f"{rel}:{node.lineno}: {ast.get_source_segment(src, node)}")
    return found


def test_no_strategy_or_task_name_is_compared_outside_its_own_folder(tmp_path):
    """What a run can do (``parts=``, predictions, ...) is asked of declarations: no module of
    the package compares a strategy's or task's name outside that option's own folder
    (``strategies/<name>/``, ``tasks/<name>/``). The scan itself finds a planted switch."""
    from gnnscale import registry

    registry.load_all()
    names = set(registry.schemas("strategy")) | set(registry.schemas("task"))
    assert {"data", "fullgraph", "auto", "node", "link"} <= names
    assert not name_switches(ROOT, names), name_switches(ROOT, names)
    planted = tmp_path / "gnnscale" / "runner"
    planted.mkdir(parents=True)
    (planted / "x.py").write_text(
        "def f(cfg, kind):\n"
        "    ok = cfg.strategy.name in ('data', 'split')\n"
        "    return ok or kind == 'link'\n")
    (tmp_path / "gnnscale" / "tasks" / "link").mkdir(parents=True)
    (tmp_path / "gnnscale" / "tasks" / "link" / "own.py").write_text(
        "def g(task):\n    return task.name == 'link'\n")
    found = name_switches(tmp_path, names)
    assert [f.split(": ")[0] for f in found] == ["gnnscale/runner/x.py:2"] * 2 + \
        ["gnnscale/runner/x.py:3"], found
